#include "api/ui_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

namespace tarn::api {
namespace {

constexpr size_t kMaxFile = 8 << 20;

std::string ContentType(const std::string& name) {
  const std::string ext = name.substr(name.rfind('.') + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "ico") return "image/x-icon";
  if (ext == "json" || ext == "map") return "application/json";
  return "application/octet-stream";
}

// A file name the directory may answer for: letters, digits, '.', '-', '_', no leading dot.
bool PlainName(const std::string& name) {
  if (name.empty() || name[0] == '.' || name.size() > 128) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

void Secure(ApiResponse& res) {
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                 "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
}

}  // namespace

bool IsUiPath(const std::string& path) { return path == "/ui" || path.rfind("/ui/", 0) == 0; }

ApiResponse UiFile(const std::string& dir, const std::string& path) {
  ApiResponse res;
  Secure(res);
  if (path == "/ui") {
    res.status = 301;
    res.set_header("Location", "/ui/");
    res.set_content("", "text/plain");
    return res;
  }
  const std::string rest = path.substr(4);  // after "/ui/"
  if (("/" + rest + "/").find("/../") != std::string::npos) {
    Error(res, 404, "no such file of the dashboard: " + path);
    return res;
  }
  const size_t slash = rest.rfind('/');
  const std::string last = slash == std::string::npos ? rest : rest.substr(slash + 1);
  // A path of the page's own (no extension) is the page; a file is a plain name at the top.
  std::string name = "index.html";
  if (last.find('.') != std::string::npos) {
    if (slash != std::string::npos || !PlainName(last)) {
      Error(res, 404, "no such file of the dashboard: " + path);
      return res;
    }
    name = last;
  }
  const std::string file = dir + "/" + name;
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxFile) {
    if (fd >= 0) ::close(fd);
    if (name == "index.html") {
      Error(res, 503,
            "the dashboard is not built: " + file +
                " is missing (scripts/web builds it; scripts/setup runs that)");
    } else {
      Error(res, 404, "no such file of the dashboard: " + path);
    }
    return res;
  }
  std::string body(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < body.size()) {
    const ssize_t n = ::read(fd, body.data() + got, body.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  body.resize(got);
  res.status = 200;
  res.set_content(std::move(body), ContentType(name));
  return res;
}

}  // namespace tarn::api
