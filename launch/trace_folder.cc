#include "launch/trace_folder.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "api/process/job_identity.h"
#include "api/process/make_folders.h"

namespace distcomm {
namespace launch {
namespace {

// What a job leaves in a trace folder: its ranks' dumps (rank_<R>.json, pid_<P>.json), their
// .tmp<pid> leftovers, its launchers' records (launcher_node<N>.json; launcher.json as this
// launcher wrote it before it named the node), and its restarts' folders (attempt_<N>).
enum class TraceFile { kNone, kDump, kLeftover, kRecord, kAttempt };

TraceFile trace_file_kind(const std::string& n) {
  const bool json = n.size() > 5 && n.substr(n.size() - 5) == ".json";
  if (n.rfind("rank_", 0) == 0 || n.rfind("pid_", 0) == 0) {
    if (json) return TraceFile::kDump;
    if (n.find(".json.tmp") != std::string::npos) return TraceFile::kLeftover;
    return TraceFile::kNone;
  }
  if (n == "launcher.json") return TraceFile::kRecord;
  if (n.rfind("launcher_node", 0) == 0 && json && n.size() > 18 &&
      n.find_first_not_of("0123456789", 13) == n.size() - 5) {
    return TraceFile::kRecord;
  }
  if (n.rfind("launcher_node", 0) == 0 && n.find(".json.tmp") != std::string::npos) return TraceFile::kLeftover;
  if (n.rfind("attempt_", 0) == 0 && n.size() > 8 && n.find_first_not_of("0123456789", 8) == std::string::npos) {
    return TraceFile::kAttempt;
  }
  return TraceFile::kNone;
}

// The run id a dump or a launcher record carries ("run_id":"..." near its start; "" in a
// dump of a distcomm that predates it); nullopt when the file cannot be read.
std::optional<std::string> run_id_of(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text(64 * 1024, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, &text[got], text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  const std::string key = "\"run_id\":\"";
  const size_t at = text.find(key);
  if (at == std::string::npos) return std::string();
  std::string id;
  for (size_t i = at + key.size(); i < text.size() && text[i] != '"'; ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) ++i;  // launchers' run ids hold no escapes; keep the char
    id += text[i];
  }
  return id;
}

void remove_tree(const std::string& path) {
  ::nftw(path.c_str(),
         [](const char* p, const struct stat*, int flag, struct FTW*) {
           if (flag == FTW_DP) ::rmdir(p);
           else ::unlink(p);
           return 0;
         },
         16, FTW_DEPTH | FTW_PHYS);
}

// "a, b, c" (cut after ~200 characters).
std::string name_list(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) {
    if (list.size() < 200) list += (list.empty() ? "" : ", ") + n;
    else if (list.back() != '.') list += ", ...";
  }
  return list;
}

std::string files_text(size_t n) { return std::to_string(n) + (n == 1 ? " file" : " files"); }

}  // namespace

void create_trace_folder(const std::string& dir) {
  const std::string why = make_folders(dir);
  if (!why.empty()) throw std::runtime_error("--trace_dir=" + dir + ": " + why);
}

std::vector<std::string> set_aside_earlier_trace_files(const std::string& dir, const std::string& run_id,
                                                       bool one_machine) {
  std::vector<std::string> said;
  try {
    create_trace_folder(dir);  // an attempt's own folder (attempt_<N>), or --trace_dir removed since
  } catch (const std::runtime_error& e) {
    said.push_back(e.what());
    return said;
  }
  // A reused folder: the earlier job's dumps would be read as this job's (`trace analyze`
  // took a dead rank's old exit dump for its last word), so they go to previous_job/.
  // Which files are an earlier job's: the folder may be shared by every machine's launcher
  // of this job (a shared file system, launchers started at once by srun), and a late
  // launcher must not move what this job's ranks on other machines already wrote. So a
  // dump or launcher record moves only when the run id it carries differs from this job's
  // (every launcher of a job has the same one: DISTCOMM_RUN_ID, or the elastic round's);
  // with no run id here (machines started without DISTCOMM_RUN_ID) those without one are
  // left, and said. What carries no run id (.tmp leftovers, attempt_<N>/ folders) moves
  // only in a one-machine job, whose launcher starts every rank itself and runs its
  // restarts after this. Nothing is ever deleted when a move fails: the file stays and the
  // line says so. previous_job/ is cleared of the job before's files only in a one-machine
  // job; across machines another launcher may be moving files into it at this moment, so
  // a file moved there replaces only its namesake (analyze tells the jobs apart by run id).
  std::vector<std::string> earlier, unknown;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      const TraceFile kind = trace_file_kind(n);
      if (kind == TraceFile::kNone) continue;
      if (kind == TraceFile::kLeftover || kind == TraceFile::kAttempt) {
        if (one_machine) earlier.push_back(n);
        continue;
      }
      const std::optional<std::string> id = run_id_of(dir + "/" + n);
      if (!id) continue;  // gone (another launcher moved it) or unreadable: left as it is
      if (*id != run_id) earlier.push_back(n);
      else if (run_id.empty()) unknown.push_back(n);
    }
    ::closedir(d);
  }
  std::sort(earlier.begin(), earlier.end());
  std::sort(unknown.begin(), unknown.end());
  if (!earlier.empty()) {
    const std::string aside = dir + "/previous_job";
    std::string not_there;  // why nothing could be moved
    if (::mkdir(aside.c_str(), 0755) != 0) {
      const int e = errno;
      struct stat st;
      if (e != EEXIST) not_there = "cannot create " + aside + ": " + std::strerror(e);
      else if (::stat(aside.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) not_there = aside + " is not a folder";
    }
    if (not_there.empty() && one_machine) {
      // The job before the earlier one: only its trace files, never anything else in there.
      if (DIR* d = ::opendir(aside.c_str())) {
        std::vector<std::string> old;
        while (dirent* e = ::readdir(d)) {
          if (trace_file_kind(e->d_name) != TraceFile::kNone) old.push_back(e->d_name);
        }
        ::closedir(d);
        for (const std::string& n : old) remove_tree(aside + "/" + n);
      }
    }
    std::vector<std::string> moved, left;
    std::string why;
    for (const std::string& n : earlier) {
      if (!not_there.empty()) {
        left.push_back(n);
        continue;
      }
      const std::string from = dir + "/" + n;
      if (::rename(from.c_str(), (aside + "/" + n).c_str()) == 0) {
        moved.push_back(n);
      } else if (errno != ENOENT) {  // ENOENT: another machine's launcher moved it first
        if (why.empty()) why = std::string("cannot move them: ") + std::strerror(errno);
        left.push_back(n);
      }
    }
    if (!moved.empty()) {
      said.push_back("--trace_dir=" + dir + ": moved an earlier job's " + files_text(moved.size()) + " (" +
                     name_list(moved) + ") to " + aside);
    }
    if (!left.empty()) {
      said.push_back("--trace_dir=" + dir + ": left an earlier job's " + files_text(left.size()) + " (" +
                     name_list(left) + ") where they are: " + (not_there.empty() ? why : not_there) +
                     " (`trace analyze` leaves out dumps of other run ids)");
    }
  }
  if (!unknown.empty()) {
    said.push_back("--trace_dir=" + dir + ": left " + files_text(unknown.size()) + " (" + name_list(unknown) +
                   ") where they are: without " + kRunIdVariable + " whether they are this job's cannot be told");
  }
  return said;
}

}  // namespace launch
}  // namespace distcomm
