#include "api/diagnostics/op_fingerprint.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace distcomm {
namespace {

const char kFormat[] = "fp1";

// The widest head of a rank_table row that the other rows line up under: room for a list of
// kRankListSpelledOut three-digit ranks ("ranks [100, 101, ..., 107]:").
constexpr size_t kTableHeadWidth = 48;

// splitmix64's finalizer: every input bit moves every output bit.
uint64_t finalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class Hasher {
 public:
  Hasher& add(uint64_t v) {
    h_ = finalize(h_ ^ (v + 0x9e3779b97f4a7c15ULL));
    return *this;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0x6a09e667f3bcc909ULL;
};

uint64_t bits_of(double d) {
  uint64_t u = 0;
  std::memcpy(&u, &d, sizeof(u));
  return u;
}

double double_of(uint64_t u) {
  double d = 0;
  std::memcpy(&d, &u, sizeof(d));
  return d;
}

bool has_root(OpType op) {
  return op == OpType::kBroadcast || op == OpType::kReduce || op == OpType::kGather || op == OpType::kScatter;
}

std::string counts_text(const std::vector<int64_t>& counts) {
  std::string s = "[";
  for (size_t i = 0; i < counts.size(); ++i) s += (i ? ", " : "") + std::to_string(counts[i]);
  return s + "]";
}

std::string reduction_text(const ReduceOp& r) {
  std::string s = r.name();
  if (r.kind == ReduceOp::PREMUL_SUM) {
    std::ostringstream f;
    f << "(" << r.factor << ")";
    s += f.str();
  }
  return s;
}

}  // namespace

void OpFingerprint::set_tensor(const Tensor& t) {
  has_tensor = true;
  dtype = t.dtype();
  count = t.numel();
  const auto& shape = t.shape();
  ndim = static_cast<uint8_t>(std::min<size_t>(shape.size(), kMaxDims));
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t at = std::min<size_t>(i, kMaxDims - 1);
    dims[at] = i < kMaxDims ? shape[i] : dims[at] * shape[i];
  }
}

std::vector<int64_t> OpFingerprint::shape() const { return std::vector<int64_t>(dims, dims + ndim); }

uint64_t OpFingerprint::agreement_hash() const {
  Hasher h;
  h.add(static_cast<uint64_t>(op)).add(seq).add(p2p).add(internal).add(has_tensor);
  if (has_tensor) h.add(static_cast<uint64_t>(dtype));
  if (has_tensor && op != OpType::kAllToAll) h.add(static_cast<uint64_t>(count));
  if (has_root(op)) h.add(static_cast<uint64_t>(root));
  if (has_reduction) {
    h.add(reduction.kind);
    if (reduction.kind == ReduceOp::PREMUL_SUM) h.add(bits_of(reduction.factor));
  }
  return h.value();
}

uint64_t OpFingerprint::p2p_hash() const {
  return Hasher().add(static_cast<uint64_t>(tag)).add(static_cast<uint64_t>(dtype)).add(static_cast<uint64_t>(count)).value();
}

uint64_t OpFingerprint::split_pairs_sum(int rank) const {
  auto pair = [](size_t src, size_t dst, int64_t count) {
    return Hasher().add(src).add(dst).add(static_cast<uint64_t>(count)).value();
  };
  uint64_t sum = 0;
  const size_t me = static_cast<size_t>(rank);
  for (size_t d = 0; d < send_counts.size(); ++d) sum += pair(me, d, send_counts[d]);
  for (size_t s = 0; s < recv_counts.size(); ++s) sum -= pair(s, me, recv_counts[s]);
  return sum;
}

std::string OpFingerprint::describe() const {
  std::string s = internal ? "host exchange " : "";
  s += op_type_name(op);
  s += p2p ? " p2p#" : " #";
  s += std::to_string(seq);
  if (has_tensor) {
    s += " ";
    s += dtype_name(dtype);
    if (op != OpType::kAllToAll) s += shape_str(shape());
  }
  if (has_root(op)) s += " root " + std::to_string(root);
  if (has_reduction) s += " " + reduction_text(reduction);
  if (op == OpType::kAllToAll) s += " sends " + counts_text(send_counts) + " receives " + counts_text(recv_counts);
  if (p2p) {
    s += op == OpType::kSend ? " to " : " from ";
    s += root < 0 ? std::string("any rank") : std::to_string(root);
    s += " tag " + std::to_string(tag);
    if (ordinal >= 0) s += " (transfer " + std::to_string(ordinal) + ")";
  }
  return s;
}

std::string OpFingerprint::differences(const OpFingerprint& other, bool shapes) const {
  std::vector<std::string> diffs;
  auto differ = [&](const std::string& what, const std::string& mine, const std::string& theirs) {
    if (mine != theirs) diffs.push_back(what + " " + mine + " vs " + theirs);
  };
  differ("op", op_type_name(op), op_type_name(other.op));
  differ("sequence number", std::to_string(seq), std::to_string(other.seq));
  if (has_tensor && other.has_tensor) {
    differ("dtype", dtype_name(dtype), dtype_name(other.dtype));
    if (op != OpType::kAllToAll) differ("count", std::to_string(count), std::to_string(other.count));
    if (shapes) differ("shape", shape_str(shape()), shape_str(other.shape()));
  }
  if (has_root(op) && has_root(other.op)) differ("root", std::to_string(root), std::to_string(other.root));
  if (has_reduction && other.has_reduction) {
    differ("reduction", reduction_text(reduction), reduction_text(other.reduction));
  }
  std::string s;
  for (size_t i = 0; i < diffs.size(); ++i) s += (i ? ", " : "") + diffs[i];
  return s;
}

std::string OpFingerprint::encode() const {
  std::ostringstream out;
  out << kFormat << " " << static_cast<int>(op) << " " << seq << " " << p2p << " " << internal << " " << has_tensor
      << " " << static_cast<int>(dtype) << " " << count << " " << static_cast<int>(ndim);
  for (int i = 0; i < ndim; ++i) out << " " << dims[i];
  out << " " << root << " " << tag << " " << ordinal << " " << has_reduction << " "
      << static_cast<int>(reduction.kind) << " " << bits_of(reduction.factor) << " " << send_counts.size();
  for (int64_t c : send_counts) out << " " << c;
  out << " " << recv_counts.size();
  for (int64_t c : recv_counts) out << " " << c;
  return out.str();
}

std::optional<OpFingerprint> OpFingerprint::decode(const std::string& text) {
  std::istringstream in(text);
  std::string format;
  int op = 0, dtype = 0, ndim = 0, kind = 0;
  bool p2p = false, internal = false, has_tensor = false, has_reduction = false;
  uint64_t factor_bits = 0;
  size_t n = 0;
  OpFingerprint f;
  if (!(in >> format) || format != kFormat) return std::nullopt;
  if (!(in >> op >> f.seq >> p2p >> internal >> has_tensor >> dtype >> f.count >> ndim)) return std::nullopt;
  if (op < 0 || op > static_cast<int>(OpType::kBatchP2P) || dtype < 0 || dtype >= kNumDTypes || ndim < 0 ||
      ndim > kMaxDims) {
    return std::nullopt;
  }
  f.op = static_cast<OpType>(op);
  f.p2p = p2p;
  f.internal = internal;
  f.has_tensor = has_tensor;
  f.dtype = static_cast<DType>(dtype);
  f.ndim = static_cast<uint8_t>(ndim);
  for (int i = 0; i < ndim; ++i) {
    if (!(in >> f.dims[i])) return std::nullopt;
  }
  if (!(in >> f.root >> f.tag >> f.ordinal >> has_reduction >> kind >> factor_bits >> n)) return std::nullopt;
  if (kind < 0 || kind > ReduceOp::PREMUL_SUM || n > (1u << 24)) return std::nullopt;
  f.has_reduction = has_reduction;
  f.reduction = ReduceOp(static_cast<ReduceOp::Kind>(kind));
  f.reduction.factor = double_of(factor_bits);
  for (std::vector<int64_t>* counts : {&f.send_counts, &f.recv_counts}) {
    if (counts == &f.recv_counts && !(in >> n)) return std::nullopt;
    if (n > (1u << 24)) return std::nullopt;
    counts->resize(n);
    for (int64_t& c : *counts) {
      if (!(in >> c)) return std::nullopt;
    }
  }
  return f;
}

std::string rank_items_text(const std::vector<int>& ranks) {
  std::string s;
  const bool ranges = ranks.size() > kRankListSpelledOut;
  for (size_t i = 0; i < ranks.size();) {
    size_t end = i + 1;  // one past the run that starts at i
    while (ranges && end < ranks.size() && ranks[end] == ranks[end - 1] + 1 && ranks[end - 1] != INT_MAX) ++end;
    // A run of two reads better as "4, 5" than as "4-5".
    if (end - i < 3) end = i + 1;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (end - i > 1) s += "-" + std::to_string(ranks[end - 1]);
    i = end;
  }
  return s;
}

std::string rank_list_text(const std::vector<int>& ranks) { return "[" + rank_items_text(ranks) + "]"; }

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return "rank " + std::to_string(ranks.front());
  if (ranks.size() <= kRankListSpelledOut) return "ranks " + rank_list_text(ranks);
  return std::to_string(std::set<int>(ranks.begin(), ranks.end()).size()) + " ranks " + rank_list_text(ranks);
}

std::string group_rank_text(int rank, int size, const std::string& group_name, const std::vector<int>& global_ranks) {
  std::string s = "rank " + std::to_string(rank) + "/" + std::to_string(size);
  if (rank >= 0 && static_cast<size_t>(rank) < global_ranks.size() && global_ranks[static_cast<size_t>(rank)] != rank) {
    s += " (world rank " + std::to_string(global_ranks[static_cast<size_t>(rank)]) + ")";
  }
  return s + " group '" + group_name + "'";
}

std::string rank_table(const std::vector<std::string>& text_by_rank) {
  // Lines in the order their first rank appears.
  std::vector<std::string> texts;
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < text_by_rank.size(); ++r) {
    const std::string& text = text_by_rank[r];
    if (!ranks_of.count(text)) texts.push_back(text);
    ranks_of[text].push_back(static_cast<int>(r));
  }
  std::vector<std::string> heads;
  size_t width = 0;
  for (const std::string& text : texts) {
    heads.push_back(ranks_text(ranks_of[text]) + ":");
    // Only heads up to kTableHeadWidth set the column: a long head (ranks that no range
    // shortens) once padded every other row with hundreds of spaces, in each rank's copy.
    if (heads.back().size() <= kTableHeadWidth) width = std::max(width, heads.back().size());
  }
  std::string table;
  for (size_t i = 0; i < texts.size(); ++i) {
    const size_t pad = heads[i].size() < width ? width - heads[i].size() : 0;
    table += "  " + heads[i] + std::string(pad + 1, ' ') + texts[i] + "\n";
  }
  return table;
}

std::string fingerprint_table(const std::vector<std::optional<OpFingerprint>>& by_rank,
                              const std::string& missing_text) {
  std::vector<std::string> texts;
  for (const auto& f : by_rank) texts.push_back(f ? f->describe() : missing_text);
  return rank_table(texts);
}

std::string elements_text(int64_t count, DType dtype) {
  return std::to_string(count) + " " + dtype_name(dtype) + " (" +
         std::to_string(count * static_cast<int64_t>(element_size(dtype))) + " bytes)";
}

std::string all_to_all_mismatches(const std::vector<OpFingerprint>& by_rank) {
  std::string lines;
  const size_t n = by_rank.size();
  for (size_t s = 0; s < n; ++s) {
    for (size_t d = 0; d < n; ++d) {
      const auto& sends = by_rank[s].send_counts;
      const auto& expects = by_rank[d].recv_counts;
      if (sends.size() != n || expects.size() != n) continue;
      if (sends[d] != expects[s]) {
        lines += "  rank " + std::to_string(s) + " sends " + std::to_string(sends[d]) + " elements to rank " +
                 std::to_string(d) + ", which expects " + std::to_string(expects[s]) + "\n";
      }
    }
  }
  return lines;
}

}  // namespace distcomm
