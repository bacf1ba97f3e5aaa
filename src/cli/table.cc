#include "cli/table.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

namespace tarn::cli {
namespace {

constexpr size_t kGap = 2;

size_t DisplayWidth(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // UTF-8 lead bytes
  return n;
}

std::string Clean(std::string cell) {
  for (char& c : cell) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return cell;
}

}  // namespace

Table::Table(std::vector<std::string> header) : header_(std::move(header)) {
  for (std::string& h : header_) h = Clean(std::move(h));
}

void Table::AddRow(std::vector<std::string> cells) {
  if (cells.size() > header_.size()) {
    std::cerr << "Table::AddRow: " << cells.size() << " cells for " << header_.size()
              << " columns\n";
    std::abort();
  }
  cells.resize(header_.size());
  for (std::string& c : cells) c = Clean(std::move(c));
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size());
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render = [&out, &widths](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - DisplayWidth(row[i]) + kGap, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  render(header_);
  for (const auto& row : rows_) render(row);
  return out;
}

}  // namespace tarn::cli
