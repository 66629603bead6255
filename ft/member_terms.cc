#include "ft/member_terms.h"

#include <cctype>

namespace distcomm {
namespace ft {
namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Whether the word before position `at` (a "rank" there) is one that says whose rank it is.
bool qualified(const std::string& text, size_t at) {
  for (const char* word : {"group ", "local ", "world ", "global "}) {
    const std::string w = word;
    if (at >= w.size() && text.compare(at - w.size(), w.size(), w) == 0 &&
        (at == w.size() || !word_char(text[at - w.size() - 1]))) {
      return true;
    }
  }
  return false;
}

// Whether a list of ranks begins at `at` ("ranks [", "ranks 1"): each is not rewritten.
bool rank_list_at(const std::string& text, size_t at) {
  static const std::string ranks = "ranks ";
  if (text.compare(at, ranks.size(), ranks) != 0 || (at > 0 && word_char(text[at - 1]))) return false;
  const size_t next = at + ranks.size();
  return next < text.size() && (text[next] == '[' || digit(text[next]));
}

}  // namespace

std::string in_member_terms(const std::string& text, const std::vector<std::string>& members) {
  static const std::string rank = "rank ";
  std::string out;
  bool list = false;
  size_t i = 0;
  while (i < text.size()) {
    list = list || rank_list_at(text, i);
    const bool starts = text.compare(i, rank.size(), rank) == 0 && (i == 0 || !word_char(text[i - 1])) &&
                        !qualified(text, i);
    size_t end = i + rank.size();
    while (starts && end < text.size() && digit(text[end])) ++end;
    const size_t digits = end - (i + rank.size());
    if (!starts || digits == 0 || digits > 6 || (end < text.size() && word_char(text[end]))) {
      out += text[i++];
      continue;
    }
    const size_t n = std::stoul(text.substr(i + rank.size(), digits));
    if (n >= members.size()) {  // not this group's: said as it was
      out += text.substr(i, end - i);
      i = end;
      continue;
    }
    std::string number = text.substr(i + rank.size(), digits);
    if (end + 1 < text.size() && text[end] == '/' && digit(text[end + 1])) {  // "rank 0/5": of a group of 5
      const size_t of = end;
      for (++end; end < text.size() && digit(text[end]);) ++end;
      number += text.substr(of, end - of);
      if (std::to_string(members.size()) != text.substr(of + 1, end - of - 1)) {  // another group's rank
        out += text.substr(i, end - i);
        i = end;
        continue;
      }
    }
    // "rank 3 (world rank 4)": a level's rank (hier's levels name their own ranks), whose
    // member is the world rank's.
    static const std::string world = " (world rank ";
    if (text.compare(end, world.size(), world) == 0) {
      size_t w = end + world.size();
      while (w < text.size() && digit(text[w])) ++w;
      const size_t wdigits = w - (end + world.size());
      const size_t m = wdigits == 0 || wdigits > 6 ? members.size() : std::stoul(text.substr(end + world.size(), wdigits));
      if (m >= members.size()) {  // not this group's world: said as it was
        out += text.substr(i, end - i);
        i = end;
        continue;
      }
      out += "member '" + members[m] + "' (its level's rank " + number + ", ";
      i = end + 2;  // "world rank 4)" follows as it was
      continue;
    }
    out += "member '" + members[n] + "' (group rank " + number;
    if (text.compare(end, 2, " (") == 0 && text.find(')', end) != std::string::npos) {
      out += ", ";  // "rank 4 (pid 5908)": one parenthesis
      i = end + 2;
    } else {
      out += ")";
      i = end;
    }
  }
  if (list) {
    std::string legend;
    for (size_t r = 0; r < members.size(); ++r) legend += (r ? ", " : "") + std::to_string(r) + " " + members[r];
    out += " [group ranks: " + legend + "]";
  }
  return out;
}

}  // namespace ft
}  // namespace distcomm
