//===- Austen.h - Jane Austen's novels from r-cran-janeaustenr ------------===//
//
// Debian's r-cran-janeaustenr ships the six novels as R data in
// usr/lib/R/site-library/janeaustenr/data/Rdata.rdb: records of
//   [uint32 big-endian uncompressed length][zlib stream]
// each an R serialization (format "X\n", XDR, version 2 or 3) of one
// character vector (STRSXP of CHARSXPs), one element per line of text.
// This reads them without R.
//
//===----------------------------------------------------------------------===//

#ifndef GPTC_RUNTIME_DATA_AUSTEN_H
#define GPTC_RUNTIME_DATA_AUSTEN_H

#include "runtime/support/Status.h"

#include <string>
#include <string_view>
#include <vector>

namespace gptc::data {

using RStringVector = std::vector<std::string>;

/// Decodes every record of an .rdb that holds character vectors, in file
/// order. Latin-1 strings are converted to UTF-8; NA strings are errors.
StatusOr<std::vector<RStringVector>> parseRdbStringVectors(std::string_view contents);

struct Novel {
  std::string title; // "Emma", "Persuasion", ...
  size_t lines = 0;
  std::string text;  // every line followed by "\n", as in a text file
};

/// The six novels of janeaustenr's Rdata.rdb, in file order (Emma,
/// Mansfield Park, Northanger Abbey, Persuasion, Pride and Prejudice,
/// Sense and Sensibility), each recognised by its title line.
StatusOr<std::vector<Novel>> parseAustenNovels(std::string_view rdbContents);
StatusOr<std::vector<Novel>> readAustenNovels(const std::string &rdbPath);

} // namespace gptc::data

#endif // GPTC_RUNTIME_DATA_AUSTEN_H
