// The dashboard's static files (web/, built by scripts/web into web/dist): GET /ui/ and the
// page's own paths (/ui/login, ...) answer its index.html, which routes in the browser;
// /ui/NAME.EXT answers that file of the directory, for plain names only (no other path
// reaches the file system). The files are public, as any web application's code is: what
// they show comes from the API, with the caller's credentials. Every answer forbids framing,
// sniffing and referrers (a login URL carries its one-time code) and allows only the
// server's own scripts, styles and connections. Stateless; thread-safe.
#pragma once

#include <string>

#include "api/routes.h"

namespace tarn::api {

// Whether `path` is the dashboard's: "/ui" or below "/ui/".
bool IsUiPath(const std::string& path);

// The answer to GET `path` (IsUiPath) from the files in `dir`.
ApiResponse UiFile(const std::string& dir, const std::string& path);

}  // namespace tarn::api
