// A plain-text table as kubectl prints one: a header row in capitals, then one row per
// item, each column as wide as its widest cell and separated from the next by two spaces.
// The last column is not padded and no line ends in blanks, so output diffs cleanly.
// Build with AddRow() in order, then Render(). Not thread-safe; use from one thread.
#pragma once

#include <string>
#include <vector>

namespace tarn::cli {

class Table {
 public:
  // `header` names the columns (written as given: callers pass capitals).
  explicit Table(std::vector<std::string> header);

  // A row with at most as many cells as the header has columns; missing ones are empty.
  // Newlines, tabs and other control characters in a cell become spaces: a row is one line.
  void AddRow(std::vector<std::string> cells);

  size_t rows() const { return rows_.size(); }

  // Every line ends with '\n'. Widths count UTF-8 characters, not bytes.
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tarn::cli
