# The nginx peer of the HTTP benchmarks (api_bench.sh, serve_bench.sh), sourced by them.
#
# nginx_config DIR PORT WORKERS: writes DIR/nginx/nginx.conf, which serves DIR/www as static
# files on 127.0.0.1:PORT with WORKERS worker processes ("auto" or a number), tuned as a fair
# peer is: no access log, sendfile, TCP_NODELAY, keep-alive without a request limit. All of
# nginx's files stay under DIR/nginx.
nginx_config() {
  local dir=$1 port=$2 workers=$3
  mkdir -p "$dir/nginx/tmp"
  cat >"$dir/nginx/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes $workers;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  default_type application/json;
  sendfile on;
  tcp_nopush on;
  tcp_nodelay on;
  keepalive_timeout 65;
  keepalive_requests 1000000;
  client_body_temp_path $dir/nginx/tmp/body;
  proxy_temp_path $dir/nginx/tmp/proxy;
  fastcgi_temp_path $dir/nginx/tmp/fastcgi;
  uwsgi_temp_path $dir/nginx/tmp/uwsgi;
  scgi_temp_path $dir/nginx/tmp/scgi;
  server {
    listen 127.0.0.1:$port;
    root $dir/www;
    location / { }
  }
}
EOF
}
