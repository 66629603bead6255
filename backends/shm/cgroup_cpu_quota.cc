#include "backends/shm/cgroup_cpu_quota.h"

#include <algorithm>
#include <climits>
#include <fstream>
#include <sstream>

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

// The tighter of two counts, 0 meaning no limit.
int tighter(int a, int b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

}  // namespace

std::vector<CgroupMount> cpu_quota_mounts(const std::string& mountinfo) {
  std::vector<CgroupMount> mounts;
  std::istringstream lines(mountinfo);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> f;
    std::istringstream words(line);
    for (std::string w; words >> w;) f.push_back(w);
    // id parent major:minor root point options [optional...] - fstype source super_options
    const auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4 || dash - f.begin() < 6) continue;
    const std::string& type = *(dash + 1);
    const std::string& options = *(dash + 3);
    CgroupMount m;
    if (type == "cgroup2") {
      m.v2 = true;
    } else if (type != "cgroup" || !has_token(options, "cpu")) {
      continue;
    }
    m.root = unescape(f[3]);
    m.point = unescape(f[4]);
    mounts.push_back(m);
  }
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

int quota_cpus_v1(const std::string& quota_us, const std::string& period_us) {
  return ceil_cpus(positive(quota_us), positive(period_us));
}

int quota_cpus_v2(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  std::string quota, period, more;
  if (!(in >> quota >> period) || (in >> more)) return 0;
  return ceil_cpus(positive(quota), positive(period));  // "max": not a number, no quota
}

int cgroup_quota_cpus(const std::string& proc_self_cgroup, const std::string& mountinfo, const ReadFile& read) {
  int cpus = 0;
  for (const CgroupMount& mount : cpu_quota_mounts(mountinfo)) {
    for (const std::string& folder : quota_folders(mount, own_cgroup(proc_self_cgroup, mount.v2))) {
      if (mount.v2) {
        if (const std::optional<std::string> max = read(folder + "/cpu.max")) cpus = tighter(cpus, quota_cpus_v2(*max));
        continue;
      }
      const std::optional<std::string> quota = read(folder + "/cpu.cfs_quota_us");
      const std::optional<std::string> period = quota ? read(folder + "/cpu.cfs_period_us") : std::nullopt;
      if (quota && period) cpus = tighter(cpus, quota_cpus_v1(*quota, *period));
    }
  }
  return cpus;
}

int cgroup_quota_cpus() {
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
  if (!cgroup || !mountinfo) return 0;
  return cgroup_quota_cpus(*cgroup, *mountinfo, read);
}

}  // namespace shm
}  // namespace distcomm
