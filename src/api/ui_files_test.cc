#include "api/ui_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace tarn::api {
namespace {

std::string Header(const ApiResponse& res, const std::string& name) {
  for (const auto& [k, v] : res.headers) {
    if (k == name) return v;
  }
  return "";
}

class UiFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tarn-ui-files-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::ofstream(dir_ + "/index.html") << "<!doctype html>page";
    std::ofstream(dir_ + "/app.js") << "export {}";
    std::ofstream(dir_ + "/.inputs") << "stamp";
    std::ofstream(dir_ + "/../tarn-ui-files-outside") << "secret";
    std::filesystem::create_directory(dir_ + "/sub");
    std::ofstream(dir_ + "/sub/x.js") << "nested";
    ::symlink("/etc/hostname", (dir_ + "/link.txt").c_str());
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    std::filesystem::remove("/tmp/tarn-ui-files-outside");
  }
  std::string dir_;
};

TEST_F(UiFilesTest, ThePagesPathsAnswerIndexAndFilesTheirType) {
  EXPECT_TRUE(IsUiPath("/ui"));
  EXPECT_TRUE(IsUiPath("/ui/login"));
  EXPECT_FALSE(IsUiPath("/uix"));
  EXPECT_FALSE(IsUiPath("/tarn/v1/ui/login-codes"));

  ApiResponse root = UiFile(dir_, "/ui");
  EXPECT_EQ(root.status, 301);
  EXPECT_EQ(Header(root, "Location"), "/ui/");
  for (const char* page : {"/ui/", "/ui/login", "/ui/a/fmnist"}) {
    ApiResponse res = UiFile(dir_, page);
    EXPECT_EQ(res.status, 200) << page;
    EXPECT_EQ(res.body, "<!doctype html>page") << page;
    EXPECT_EQ(res.content_type, "text/html; charset=utf-8") << page;
  }
  ApiResponse js = UiFile(dir_, "/ui/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "export {}");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(Header(js, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_NE(Header(js, "Content-Security-Policy").find("frame-ancestors 'none'"),
            std::string::npos);
  EXPECT_EQ(Header(js, "X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(Header(js, "Referrer-Policy"), "no-referrer");
}

TEST_F(UiFilesTest, NothingButPlainFilesAtTheTopIsReached) {
  for (const char* path : {"/ui/../tarn-ui-files-outside", "/ui/..", "/ui/.inputs",
                           "/ui/sub/x.js", "/ui/link.txt", "/ui/missing.js", "/ui/a%2F.js",
                           "/ui/sub"}) {
    ApiResponse res = UiFile(dir_, path);
    if (std::string(path) == "/ui/sub") {
      // No extension: a path of the page's own.
      EXPECT_EQ(res.body, "<!doctype html>page");
      continue;
    }
    EXPECT_EQ(res.status, 404) << path << ": " << res.body;
    EXPECT_EQ(res.body.find("secret"), std::string::npos) << path;
  }
}

TEST_F(UiFilesTest, AnUnbuiltDashboardSaysHowToBuildIt) {
  std::filesystem::remove(dir_ + "/index.html");
  ApiResponse res = UiFile(dir_, "/ui/");
  EXPECT_EQ(res.status, 503);
  EXPECT_NE(res.body.find("scripts/web"), std::string::npos) << res.body;
}

}  // namespace
}  // namespace tarn::api
