// bench/run json: the JSON reading of tarn-serve's predict bodies against simdjson 3.0.1
// (Debian's libsimdjson-dev) walked directly, and nlohmann::json, on the same bodies: TF
// Serving row-format requests of 1, 16 and 64 Fashion-MNIST test images, each pixel written
// as Python's json.dumps writes (pixel / 255.0).tolist(): the shortest repr of a double.
// tarn-serve reads bodies with simdjson's DOM since this benchmark measured its own reader
// (serve/json_reader.cc before 2026-12-06) at 0.33x a bare simdjson walk; the figures below
// are thus the cost of tarn's Json view and codec checks over that floor.
//
// Per body size, the microseconds per body (median of 5 rounds of about 0.3 s) of:
//   tarn_tree          ParseJson: the whole body checked and read (simdjson's DOM);
//   tarn_request       ParsePredictRequest: read and walked into the float32 [N,1,28,28]
//                      Tensor, with every check the codec makes (what the server runs);
//   simdjson_dom       simdjson's DOM parser alone;
//   simdjson_request   simdjson's DOM walked into the same Tensor with the same shape checks
//                      and nothing else (no b64, columnar or top_k branches): the floor;
//   simdjson_ondemand_request  the same through On-Demand, whose kernel is chosen at compile
//                      time: for a build that runs on any x86-64 (as tarn's), the fallback
//                      one; it checks no more than it walks;
//   nlohmann_tree      nlohmann::json::parse.
// Each simdjson figure includes the copy of the body into a padded_string (the server's
// body is a std::string without simdjson's padding; ParseJson copies it too).
//
// usage: json_bench [DATA_DIR]   (default /usr/share/datasets/fashion-mnist)
// Prints one flat JSON object.
#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/json_reader.h"
#include "serve/model_meta.h"
#include "serve/request_codec.h"
#include "train/idx.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string Body(const tarn::train::IdxArray& images, int n) {
  std::string s = "{\"instances\": [";
  char buf[32];
  for (int i = 0; i < n; ++i) {
    s += i ? ", [[" : "[[";
    for (int r = 0; r < 28; ++r) {
      s += r ? ", [" : "[";
      for (int c = 0; c < 28; ++c) {
        const double v = images.data[static_cast<size_t>(i) * 784 + r * 28 + c] / 255.0;
        auto res = std::to_chars(buf, buf + sizeof(buf), v);
        std::string_view num(buf, res.ptr - buf);
        if (num.find_first_of(".e") == std::string_view::npos)
          s += std::string(num) + ".0";
        else
          s += num;
        if (c < 27) s += ", ";
      }
      s += "]";
    }
    s += "]]";
  }
  return s + "]}";
}

// simdjson On-Demand into [N, 1, 28, 28]: the row format with nested lists only.
bool SimdjsonRequest(simdjson::ondemand::parser& parser, const std::string& body,
                     std::vector<float>& out, int64_t& n) {
  simdjson::padded_string padded(body);
  simdjson::ondemand::document doc;
  if (parser.iterate(padded).get(doc)) return false;
  simdjson::ondemand::object root;
  if (doc.get_object().get(root)) return false;
  out.clear();
  n = 0;
  bool seen = false;
  for (auto field : root) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (key != "instances") return false;  // the bench's bodies have nothing else
    seen = true;
    simdjson::ondemand::array instances;
    if (field.value().get_array().get(instances)) return false;
    for (auto instance : instances) {
      simdjson::ondemand::array channels;
      if (instance.get_array().get(channels)) return false;
      size_t c_count = 0;
      for (auto channel : channels) {
        simdjson::ondemand::array rows;
        if (channel.get_array().get(rows) || ++c_count > 1) return false;
        size_t r_count = 0;
        for (auto row : rows) {
          simdjson::ondemand::array cols;
          if (row.get_array().get(cols) || ++r_count > 28) return false;
          size_t c = 0;
          for (auto v : cols) {
            double d;
            if (v.get_double().get(d) || ++c > 28) return false;
            out.push_back(static_cast<float>(d));
          }
          if (c != 28) return false;
        }
        if (r_count != 28) return false;
      }
      if (c_count != 1) return false;
      ++n;
    }
  }
  return seen;
}

// simdjson's DOM (the kernel chosen at run time for this CPU) walked into the same Tensor.
bool SimdjsonDomRequest(simdjson::dom::parser& parser, const std::string& body,
                        std::vector<float>& out, int64_t& n) {
  simdjson::padded_string padded(body);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root)) return false;
  simdjson::dom::object object;
  if (root.get_object().get(object) || object.size() != 1) return false;
  simdjson::dom::array instances;
  if (object["instances"].get_array().get(instances)) return false;
  out.clear();
  n = 0;
  for (simdjson::dom::element instance : instances) {
    simdjson::dom::array channels;
    if (instance.get_array().get(channels) || channels.size() != 1) return false;
    for (simdjson::dom::element channel : channels) {
      simdjson::dom::array rows;
      if (channel.get_array().get(rows) || rows.size() != 28) return false;
      for (simdjson::dom::element row : rows) {
        simdjson::dom::array cols;
        if (row.get_array().get(cols) || cols.size() != 28) return false;
        for (simdjson::dom::element v : cols) {
          double d;
          if (v.get_double().get(d)) return false;
          out.push_back(static_cast<float>(d));
        }
      }
    }
    ++n;
  }
  return true;
}

// Median microseconds per call of `f` over 5 rounds of about 0.3 s.
double Time(const std::function<bool()>& f) {
  if (!f()) {
    std::cerr << "json_bench: a parse failed\n";
    std::exit(1);
  }
  int calls = 1;
  for (auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::milliseconds(50); ++calls) f();
  const int per_round = std::max(1, calls * 6);
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < per_round; ++i) f();
    rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
                     per_round);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string data = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  auto images = tarn::train::ReadIdx(data + "/t10k-images-idx3-ubyte.gz", 3);
  if (!images.ok()) {
    std::cerr << "json_bench: " << images.status().ToString() << "\n";
    return 1;
  }
  tarn::serve::ModelMeta meta;
  meta.input_shape = {1, 28, 28};
  nlohmann::json out = {
      {"benchmark", "json"},
      {"simdjson_version", std::to_string(simdjson::SIMDJSON_VERSION_MAJOR) + "." +
                               std::to_string(simdjson::SIMDJSON_VERSION_MINOR) + "." +
                               std::to_string(simdjson::SIMDJSON_VERSION_REVISION)},
      {"simdjson_ondemand_implementation", simdjson::builtin_implementation()->name()},
      {"simdjson_implementation", simdjson::get_active_implementation()->name()},
      {"bodies",
       "TF Serving row format, N Fashion-MNIST test images as nested lists of "
       "(pixel / 255.0) in shortest double repr"},
      {"timing",
       "median of 5 rounds of ~0.3 s, one thread; simdjson figures include copying "
       "the body into a padded_string"}};
  simdjson::dom::parser dom;
  simdjson::ondemand::parser ondemand;
  for (int n : {1, 16, 64}) {
    const std::string body = Body(*images, n);
    const std::string p = "n" + std::to_string(n) + "_";
    out[p + "body_bytes"] = body.size();
    // The two request paths must agree on every float.
    auto ours = tarn::serve::ParsePredictRequest(body, meta);
    std::vector<float> theirs;
    int64_t count = 0;
    std::vector<float> dom_floats;
    int64_t dom_count = 0;
    if (!ours.ok() || !SimdjsonRequest(ondemand, body, theirs, count) ||
        ours->input.data != theirs || count != n ||
        !SimdjsonDomRequest(dom, body, dom_floats, dom_count) || dom_floats != theirs ||
        dom_count != n) {
      std::cerr << "json_bench: tarn's and simdjson's tensors differ for " << n << " images\n";
      return 1;
    }
    const double tree = Time([&] { return tarn::serve::ParseJson(body).ok(); });
    const double request = Time([&] { return tarn::serve::ParsePredictRequest(body, meta).ok(); });
    const double sdom = Time([&] {
      simdjson::padded_string padded(body);
      simdjson::dom::element e;
      return dom.parse(padded).get(e) == simdjson::SUCCESS;
    });
    const double sreq = Time([&] { return SimdjsonDomRequest(dom, body, theirs, count); });
    const double sod = Time([&] { return SimdjsonRequest(ondemand, body, theirs, count); });
    const double nl = Time([&] { return !nlohmann::json::parse(body).is_discarded(); });
    const double mb = body.size() / 1e6;
    out[p + "tarn_tree_us"] = tree;
    out[p + "tarn_request_us"] = request;
    out[p + "simdjson_dom_us"] = sdom;
    out[p + "simdjson_request_us"] = sreq;
    out[p + "simdjson_ondemand_request_us"] = sod;
    out[p + "nlohmann_tree_us"] = nl;
    out[p + "tarn_request_mb_per_s"] = mb / (request / 1e6);
    out[p + "simdjson_request_mb_per_s"] = mb / (sreq / 1e6);
    out[p + "ratio_simdjson_request_to_tarn_request_speed"] = request / sreq;
    out[p + "ratio_simdjson_dom_to_tarn_tree_speed"] = tree / sdom;
    out[p + "ratio_tarn_tree_to_nlohmann_speed"] = nl / tree;
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
