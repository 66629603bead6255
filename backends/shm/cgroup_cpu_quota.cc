#include "backends/shm/cgroup_cpu_quota.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

namespace distcomm {
namespace shm {
namespace {

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, by);) parts.push_back(part);
  return parts;
}

bool has_token(const std::string& list, const std::string& token) {
  for (const std::string& t : split(list, ',')) {
    if (t == token) return true;
  }
  return false;
}

// mountinfo writes a space, tab, newline and backslash in a path as \040, \011, \012, \134.
std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto octal = [&](size_t at) { return at < text.size() && text[at] >= '0' && text[at] <= '7'; };
    if (text[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
      out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0'));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

// A positive decimal number, nothing else; 0 otherwise.
unsigned long long positive(const std::string& text) {
  const std::string t = trimmed(text);
  if (t.empty() || t.size() > 19 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  return std::stoull(t);
}

int ceil_cpus(unsigned long long quota, unsigned long long period) {
  if (quota == 0 || period == 0) return 0;
  const unsigned long long cpus = quota / period + (quota % period != 0 ? 1 : 0);
  return cpus > static_cast<unsigned long long>(INT_MAX) ? INT_MAX : static_cast<int>(cpus);
}

}  // namespace

std::vector<CgroupMount> cpu_quota_mounts(const std::string& mountinfo) {
  // Each candidate's mount point as the text writes it (escaped), to compare with later lines'.
  std::vector<std::pair<CgroupMount, std::string_view>> found;
  const std::string_view text(mountinfo);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    // id parent major:minor root point options [optional...] - fstype source super_options
    size_t at[6];  // where fields 1-6 begin (0-based: id at 0); none contains a space
    size_t pos = 0;
    int n = 0;
    for (; n < 6 && pos < line.size(); ++n) {
      at[n] = pos;
      const size_t space = line.find(' ', pos);
      pos = space == std::string_view::npos ? line.size() : space + 1;
    }
    if (n < 6 || pos >= line.size()) continue;
    const std::string_view point = line.substr(at[4], at[5] - 1 - at[4]);
    // A later mount at the same point hides the earlier ones (whatever its type).
    for (size_t i = 0; i < found.size();) {
      if (found[i].second == point) {
        found.erase(found.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    // The type, right after the optional fields' end; a line of another type goes no further.
    const size_t dash = line.find(" - ", at[5]);
    if (dash == std::string_view::npos) continue;
    std::string_view rest = line.substr(dash + 3);  // fstype source super_options
    const size_t type_end = rest.find(' ');
    if (type_end == std::string_view::npos) continue;
    const std::string_view type = rest.substr(0, type_end);
    if (type != "cgroup" && type != "cgroup2") continue;
    rest = rest.substr(type_end + 1);
    const size_t source_end = rest.find(' ');
    if (source_end == std::string_view::npos) continue;
    std::string_view options = rest.substr(source_end + 1);
    options = options.substr(0, options.find(' '));
    if (options.empty()) continue;
    CgroupMount m;
    m.v2 = type == "cgroup2";
    if (!m.v2 && !has_token(std::string(options), "cpu")) continue;
    m.root = unescape(std::string(line.substr(at[3], at[4] - 1 - at[3])));
    m.point = unescape(std::string(point));
    found.emplace_back(std::move(m), point);
  }
  std::vector<CgroupMount> mounts;
  for (auto& f : found) mounts.push_back(std::move(f.first));
  return mounts;
}

std::string own_cgroup(const std::string& proc_self_cgroup, bool v2) {
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path; the path may hold ':' itself.
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a);
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool match = v2 ? (id == "0" && controllers.empty()) : has_token(controllers, "cpu");
    if (match) return line.substr(b + 1);
  }
  return "";
}

std::vector<std::string> quota_folders(const CgroupMount& mount, const std::string& cgroup) {
  if (cgroup.empty()) return {};
  std::string point = mount.point;
  while (point.size() > 1 && point.back() == '/') point.pop_back();
  std::string root = mount.root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  std::vector<std::string> below;  // the cgroup's path below the mount's root, folder by folder
  const std::vector<std::string> parts = split(cgroup, '/');
  const bool escaped = std::find(parts.begin(), parts.end(), "..") != parts.end();
  if (!escaped) {
    std::string relative;
    if (root == "/") {
      relative = cgroup;
    } else if (cgroup.compare(0, root.size(), root) == 0 &&
               (cgroup.size() == root.size() || cgroup[root.size()] == '/')) {
      relative = cgroup.substr(root.size());
    }  // else not under the mount's root: not visible, the mount point alone
    for (const std::string& p : split(relative, '/')) {
      if (!p.empty() && p != ".") below.push_back(p);
    }
  }
  std::vector<std::string> folders;
  const std::string base = point == "/" ? "" : point;
  for (size_t n = below.size(); n > 0; --n) {
    std::string folder = base;
    for (size_t i = 0; i < n; ++i) folder += "/" + below[i];
    folders.push_back(folder);
  }
  folders.push_back(point);
  return folders;
}

namespace {

// A quota's numbers, {0, 0} for none or text that is not numbers.
std::pair<unsigned long long, unsigned long long> v1_numbers(const std::string& quota_us, const std::string& period_us) {
  return {positive(quota_us), positive(period_us)};
}

std::pair<unsigned long long, unsigned long long> v2_numbers(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period, more;
  if (!(in >> quota >> period) || (in >> more)) return {0, 0};
  return {positive(quota), positive(period)};  // "max": not a number, no quota
}

// Whether a / b < c / d, for positive numbers (no rounding, no overflow).
bool smaller_ratio(unsigned long long a, unsigned long long b, unsigned long long c, unsigned long long d) {
  return static_cast<unsigned __int128>(a) * d < static_cast<unsigned __int128>(c) * b;
}

}  // namespace

int quota_cpus_v1(const std::string& quota_us, const std::string& period_us) {
  const auto [quota, period] = v1_numbers(quota_us, period_us);
  return ceil_cpus(quota, period);
}

int quota_cpus_v2(const std::string& cpu_max) {
  const auto [quota, period] = v2_numbers(cpu_max);
  return ceil_cpus(quota, period);
}

std::string CpuQuota::describe() const {
  if (cpus == 0) return "none";
  return std::to_string(cpus) + ": " + std::to_string(quota_us) + "/" + std::to_string(period_us) + " us at " + folder;
}

CpuQuota cgroup_cpu_quota(const std::string& proc_self_cgroup, const std::string& mountinfo, const ReadFile& read) {
  CpuQuota tightest;
  const auto consider = [&](const std::pair<unsigned long long, unsigned long long>& numbers, const std::string& folder) {
    const int cpus = ceil_cpus(numbers.first, numbers.second);
    if (cpus == 0) return;  // no quota
    if (tightest.cpus != 0 && !smaller_ratio(numbers.first, numbers.second, tightest.quota_us, tightest.period_us)) {
      return;
    }
    tightest.cpus = cpus;
    tightest.quota_us = numbers.first;
    tightest.period_us = numbers.second;
    tightest.folder = folder;
  };
  for (const CgroupMount& mount : cpu_quota_mounts(mountinfo)) {
    for (const std::string& folder : quota_folders(mount, own_cgroup(proc_self_cgroup, mount.v2))) {
      if (mount.v2) {
        if (const std::optional<std::string> max = read(folder + "/cpu.max")) consider(v2_numbers(*max), folder);
        continue;
      }
      const std::optional<std::string> quota = read(folder + "/cpu.cfs_quota_us");
      const std::optional<std::string> period = quota ? read(folder + "/cpu.cfs_period_us") : std::nullopt;
      if (quota && period) consider(v1_numbers(*quota, *period), folder);
    }
  }
  return tightest;
}

CpuQuota cgroup_cpu_quota() {
  const ReadFile read = [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path);
    if (!in) return std::nullopt;
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return std::nullopt;
    return text.str();
  };
  const std::optional<std::string> cgroup = read("/proc/self/cgroup");
  const std::optional<std::string> mountinfo = read("/proc/self/mountinfo");
  if (!cgroup || !mountinfo) return {};
  return cgroup_cpu_quota(*cgroup, *mountinfo, read);
}

int cgroup_quota_cpus(const std::string& proc_self_cgroup, const std::string& mountinfo, const ReadFile& read) {
  return cgroup_cpu_quota(proc_self_cgroup, mountinfo, read).cpus;
}

int cgroup_quota_cpus() { return cgroup_cpu_quota().cpus; }

}  // namespace shm
}  // namespace distcomm
