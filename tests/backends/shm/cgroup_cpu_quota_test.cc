// A cgroup CPU quota counted as CPUs (backends/shm/cgroup_cpu_quota.h), from the files' texts:
// cgroup v1 (cpu.cfs_quota_us / cpu.cfs_period_us) and v2 (cpu.max), no quota ("max", -1),
// limits nested in ancestors (the tightest counts), cgroup namespaces and bind mounts that
// show the process's cgroup at the mount point, mounts hidden under later ones, and where the
// quota was read (shm's INFO line). The real files: shm_cpus_test's
// ACpuQuotaOfHalfACpuCountsOne.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/shm/cgroup_cpu_quota.h"

namespace distcomm {
namespace shm {
namespace {

// A tree of files for cgroup_quota_cpus()'s reads; any other path cannot be read.
ReadFile files(const std::map<std::string, std::string>& contents) {
  return [contents](const std::string& path) -> std::optional<std::string> {
    const auto found = contents.find(path);
    if (found == contents.end()) return std::nullopt;
    return found->second;
  };
}

// This machine's kind: cgroup v1 controllers one a hierarchy, and an empty unified one.
const char* const kHybridMountinfo =
    "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// A cgroup v2 host (systemd, Kubernetes with the systemd driver).
const char* const kV2Mountinfo =
    "29 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CgroupCpuQuota, V1QuotaIsCeilOfQuotaOverPeriod) {
  EXPECT_EQ(quota_cpus_v1("50000\n", "100000\n"), 1);  // half a CPU: 1, as Go and the JVM
  EXPECT_EQ(quota_cpus_v1("400000\n", "100000\n"), 4);
  EXPECT_EQ(quota_cpus_v1("150000", "100000"), 2);
  EXPECT_EQ(quota_cpus_v1("1000", "1000000"), 1);
  EXPECT_EQ(quota_cpus_v1("6400000", "100000"), 64);
}

TEST(CgroupCpuQuota, V1NoQuotaOrBadTextIsNone) {
  EXPECT_EQ(quota_cpus_v1("-1\n", "100000\n"), 0);
  EXPECT_EQ(quota_cpus_v1("", "100000"), 0);
  EXPECT_EQ(quota_cpus_v1("50000", "0"), 0);
  EXPECT_EQ(quota_cpus_v1("50000", ""), 0);
  EXPECT_EQ(quota_cpus_v1("5e4", "100000"), 0);
  EXPECT_EQ(quota_cpus_v1("99999999999999999999999", "1"), 0);  // not a number it can hold
}

TEST(CgroupCpuQuota, V2CpuMaxIsCeilOfQuotaOverPeriod) {
  EXPECT_EQ(quota_cpus_v2("400000 100000\n"), 4);  // a Kubernetes CPU limit of 4
  EXPECT_EQ(quota_cpus_v2("50000 100000\n"), 1);
  EXPECT_EQ(quota_cpus_v2("250000 100000"), 3);
  EXPECT_EQ(quota_cpus_v2("  150000\t100000  "), 2);
}

TEST(CgroupCpuQuota, V2MaxOrBadTextIsNone) {
  EXPECT_EQ(quota_cpus_v2("max 100000\n"), 0);
  EXPECT_EQ(quota_cpus_v2(""), 0);
  EXPECT_EQ(quota_cpus_v2("400000"), 0);
  EXPECT_EQ(quota_cpus_v2("400000 100000 7"), 0);
  EXPECT_EQ(quota_cpus_v2("400000 0"), 0);
  EXPECT_EQ(quota_cpus_v2("-1 100000"), 0);
}

TEST(CgroupCpuQuota, MountsAreTheCpuHierarchiesAndTheUnifiedOne) {
  const std::vector<CgroupMount> mounts = cpu_quota_mounts(kHybridMountinfo);
  ASSERT_EQ(mounts.size(), 2u);  // not cpuacct, not cpuset (which starts with "cpu"), not tmpfs
  EXPECT_FALSE(mounts[0].v2);
  EXPECT_EQ(mounts[0].point, "/sys/fs/cgroup/cpu");
  EXPECT_EQ(mounts[0].root, "/");
  EXPECT_TRUE(mounts[1].v2);
  EXPECT_EQ(mounts[1].point, "/sys/fs/cgroup/unified");
}

TEST(CgroupCpuQuota, MountsReadOptionalFieldsAndEscapes) {
  // cpu and cpuacct together (Docker, older systemd), optional fields before " - ", a mount
  // point with a space (\040), and a root that is not "/" (a container's bind mount).
  const std::vector<CgroupMount> mounts = cpu_quota_mounts(
      "40 31 0:35 /kubepods/pod1/c1 /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:17 shared:3 - cgroup cgroup "
      "rw,cpu,cpuacct\n"
      "41 31 0:36 / /mnt/my\\040cgroups rw - cgroup cgroup rw,cpuacct,cpu\n"
      "42 31 0:37 / /x rw - cgroup cgroup rw,cpuset\n"
      "43 31 0:38 / /y rw - cgroup cgroup rw,name=systemd\n"
      "not a mount line\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].root, "/kubepods/pod1/c1");
  EXPECT_EQ(mounts[0].point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(mounts[1].point, "/mnt/my cgroups");
}

TEST(CgroupCpuQuota, OwnCgroupIsTheCpuLineOrTheUnifiedLine) {
  const std::string text =
      "9:name=systemd:/\n"
      "3:cpuset:/set\n"
      "2:cpu,cpuacct:/kubepods/pod1/c1\n"
      "0::/kubepods.slice/pod1.slice/cri:c1.scope\n";
  EXPECT_EQ(own_cgroup(text, false), "/kubepods/pod1/c1");
  EXPECT_EQ(own_cgroup(text, true), "/kubepods.slice/pod1.slice/cri:c1.scope");  // ':' in a name
  EXPECT_EQ(own_cgroup("3:cpuset:/set\n", false), "");
  EXPECT_EQ(own_cgroup("1:cpu:/a\n", true), "");
}

TEST(CgroupCpuQuota, FoldersGoFromTheCgroupUpToTheMountPoint) {
  const CgroupMount host{false, "/", "/sys/fs/cgroup/cpu"};
  EXPECT_EQ(quota_folders(host, "/kubepods/pod1/c1"),
            (std::vector<std::string>{"/sys/fs/cgroup/cpu/kubepods/pod1/c1", "/sys/fs/cgroup/cpu/kubepods/pod1",
                                      "/sys/fs/cgroup/cpu/kubepods", "/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(quota_folders(host, "/"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(quota_folders(host, ""), (std::vector<std::string>{}));  // not in this hierarchy
}

TEST(CgroupCpuQuota, FoldersOfAMountThatShowsPartOfTheTree) {
  // A container's bind mount of its own cgroup (root /kubepods/pod1): what lies below it.
  const CgroupMount bound{false, "/kubepods/pod1", "/sys/fs/cgroup/cpu"};
  EXPECT_EQ(quota_folders(bound, "/kubepods/pod1/c1"),
            (std::vector<std::string>{"/sys/fs/cgroup/cpu/c1", "/sys/fs/cgroup/cpu"}));
  EXPECT_EQ(quota_folders(bound, "/kubepods/pod1"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
  // Not below it (/kubepods/pod10 is not /kubepods/pod1's), or moved out of the cgroup
  // namespace (".."): not visible, the mount point alone.
  EXPECT_EQ(quota_folders(bound, "/kubepods/pod10/c1"), (std::vector<std::string>{"/sys/fs/cgroup/cpu"}));
  const CgroupMount ns{true, "/", "/sys/fs/cgroup"};
  EXPECT_EQ(quota_folders(ns, "/../other"), (std::vector<std::string>{"/sys/fs/cgroup"}));
  // Mounted at "/" (a chroot's tree): no "//".
  EXPECT_EQ(quota_folders(CgroupMount{true, "/", "/"}, "/a"), (std::vector<std::string>{"/a", "/"}));
}

TEST(CgroupCpuQuota, AKubernetesPodLimitOf4OnV2Counts4) {
  const std::string cgroup = "0::/kubepods.slice/kubepods-pod1.slice/cri-c1.scope\n";
  EXPECT_EQ(cgroup_quota_cpus(cgroup, kV2Mountinfo,
                              files({
                                  {"/sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-c1.scope/cpu.max", "400000 100000\n"},
                                  {"/sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cpu.max", "400000 100000\n"},
                                  {"/sys/fs/cgroup/kubepods.slice/cpu.max", "max 100000\n"},
                              })),
            4);
}

TEST(CgroupCpuQuota, TheTightestAncestorCounts) {
  const std::string cgroup = "0::/pod/c1\n";
  // The pod's limit below the container's (the kernel enforces both).
  EXPECT_EQ(cgroup_quota_cpus(cgroup, kV2Mountinfo,
                              files({{"/sys/fs/cgroup/pod/c1/cpu.max", "800000 100000"},
                                     {"/sys/fs/cgroup/pod/cpu.max", "200000 100000"}})),
            2);
  // The container's below the pod's.
  EXPECT_EQ(cgroup_quota_cpus(cgroup, kV2Mountinfo,
                              files({{"/sys/fs/cgroup/pod/c1/cpu.max", "100000 100000"},
                                     {"/sys/fs/cgroup/pod/cpu.max", "400000 100000"}})),
            1);
  // No limit on the container, one on the pod.
  EXPECT_EQ(cgroup_quota_cpus(cgroup, kV2Mountinfo,
                              files({{"/sys/fs/cgroup/pod/c1/cpu.max", "max 100000"},
                                     {"/sys/fs/cgroup/pod/cpu.max", "300000 100000"}})),
            3);
  // Different periods: 3 CPUs (150 ms a 50 ms period) against 2 (200 ms a 100 ms period).
  EXPECT_EQ(cgroup_quota_cpus(cgroup, kV2Mountinfo,
                              files({{"/sys/fs/cgroup/pod/c1/cpu.max", "150000 50000"},
                                     {"/sys/fs/cgroup/pod/cpu.max", "200000 100000"}})),
            2);
}

TEST(CgroupCpuQuota, V1NestedLimitsOnTheCpuHierarchy) {
  const std::string cgroup = "4:memory:/elsewhere\n2:cpu,cpuacct:/kubepods/burstable/pod1/c1\n1:cpuset:/\n";
  const std::string mountinfo = "40 31 0:35 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n";
  const std::string base = "/sys/fs/cgroup/cpu,cpuacct/kubepods/burstable";
  EXPECT_EQ(cgroup_quota_cpus(cgroup, mountinfo,
                              files({{base + "/pod1/c1/cpu.cfs_quota_us", "-1\n"},
                                     {base + "/pod1/c1/cpu.cfs_period_us", "100000\n"},
                                     {base + "/pod1/cpu.cfs_quota_us", "50000\n"},
                                     {base + "/pod1/cpu.cfs_period_us", "100000\n"},
                                     {base + "/cpu.cfs_quota_us", "-1\n"},
                                     {base + "/cpu.cfs_period_us", "100000\n"},
                                     {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n"},
                                     {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n"}})),
            1);
  // The quota without its period (a file that cannot be read) counts nothing.
  EXPECT_EQ(cgroup_quota_cpus(cgroup, mountinfo, files({{base + "/pod1/cpu.cfs_quota_us", "50000\n"}})), 0);
}

TEST(CgroupCpuQuota, ACgroupNamespaceReadsTheMountRoot) {
  // Inside a container with its own cgroup namespace, /proc/self/cgroup says "/" and the
  // mount shows the container's cgroup at its root.
  EXPECT_EQ(cgroup_quota_cpus("0::/\n", kV2Mountinfo, files({{"/sys/fs/cgroup/cpu.max", "200000 100000\n"}})), 2);
  // v1 alike, where the container's folder is bind-mounted at the mount point and
  // /proc/self/cgroup names the host's path (no cgroup namespace).
  EXPECT_EQ(cgroup_quota_cpus("2:cpu,cpuacct:/docker/abc\n",
                              "40 31 0:35 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n",
                              files({{"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "300000"},
                                     {"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000"},
                                     {"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "100000"},
                                     {"/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000"}})),
            3);
}

TEST(CgroupCpuQuota, NoQuotaAnywhereIsNone) {
  // This machine's kind, at the root of every hierarchy: -1, and no cpu.max at v2's root.
  EXPECT_EQ(cgroup_quota_cpus("1:cpu:/\n0::/\n", kHybridMountinfo,
                              files({{"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}})),
            0);
  EXPECT_EQ(cgroup_quota_cpus("0::/a\n", kV2Mountinfo, files({{"/sys/fs/cgroup/a/cpu.max", "max 100000\n"}})), 0);
  EXPECT_EQ(cgroup_quota_cpus("", "", files({})), 0);
  // A quota in a hierarchy this process is not in (no line for it) is not its own.
  EXPECT_EQ(cgroup_quota_cpus("0::/a\n", kHybridMountinfo,
                              files({{"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000"}})),
            0);
}

TEST(CgroupCpuQuota, HybridTakesTheQuotaWhereverItIs) {
  // cgroup v1 holds the cpu controller; the unified hierarchy has no cpu.max for it.
  EXPECT_EQ(cgroup_quota_cpus("1:cpu:/job\n0::/job\n", kHybridMountinfo,
                              files({{"/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "200000\n"},
                                     {"/sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n"}})),
            2);
}

// A mount hidden under a later one at the same point (still listed in mountinfo) is not
// read: a path under that point resolves through the mount on top. Before, both were read,
// the hidden one's folders through the top one's files.
TEST(CgroupCpuQuota, AnOvermountedMountIsNotRead) {
  // A cgroup v1 cpu mount, then another cgroup mount of the cpu hierarchy's container folder
  // over it (root /docker/abc): only the second.
  std::vector<CgroupMount> mounts = cpu_quota_mounts(
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "50 31 0:29 /docker/abc /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n");
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].root, "/docker/abc");
  // A tmpfs over the cgroup mount hides it: nothing to read there.
  mounts = cpu_quota_mounts(
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "60 32 0:50 / /sys/fs/cgroup/cpu rw,relatime - tmpfs tmpfs rw\n");
  EXPECT_TRUE(mounts.empty());
  // The same point written with an escape is the same point; another point is not hidden.
  mounts = cpu_quota_mounts(
      "41 31 0:36 / /mnt/my\\040cgroups rw - cgroup cgroup rw,cpu\n"
      "42 31 0:38 / /mnt/my rw - tmpfs tmpfs rw\n"
      "43 31 0:37 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
      "44 31 0:39 / /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw\n");
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].point, "/sys/fs/cgroup");
  EXPECT_TRUE(mounts[1].v2);
  EXPECT_EQ(mounts[1].point, "/mnt/my cgroups");
}

// What the hidden mount's folders read: the top mount's files. The process's cgroup is /job;
// the hidden mount shows the whole hierarchy, the one on top (root /other) another cgroup's
// folder, where a /job of its own has a quota of half a CPU. Through the hidden mount that
// folder passed for the process's (1 CPU counted); only the top mount counts: 2.
TEST(CgroupCpuQuota, AnOvermountedMountsFoldersAreNotTakenForTheProcesss) {
  const std::string mountinfo =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
      "50 31 0:29 /other /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n";
  EXPECT_EQ(cgroup_quota_cpus("1:cpu:/job\n", mountinfo,
                              files({{"/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "50000"},
                                     {"/sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "200000"},
                                     {"/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000"}})),
            2);
}

// Lines of other types are passed over whatever they hold after their type (a host of
// 20,000 mounts: only the cgroup ones are taken apart), and a short line is no mount.
TEST(CgroupCpuQuota, ManyOtherMountsAreSkipped) {
  std::string mountinfo;
  for (int i = 0; i < 20000; ++i) {
    mountinfo += std::to_string(100 + i) + " 30 0:" + std::to_string(i) + " / /run/containers/c" + std::to_string(i) +
                 " rw,relatime shared:9 - overlay overlay rw,lowerdir=/a:/b,cpu\n";
  }
  mountinfo += "1 2 3 / /x rw -\n";                        // no type
  mountinfo += "1 2 3 / /y rw - cgroup\n";                 // no source, no options
  mountinfo += "1 2 3 / - rw - tmpfs tmpfs rw\n";          // a "-" where the point is
  mountinfo += "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu";  // no newline at the end
  const std::vector<CgroupMount> mounts = cpu_quota_mounts(mountinfo);
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].point, "/sys/fs/cgroup/cpu");
}

// The quota comes with where it was read, for shm's INFO line: the tightest, by quota over
// period (1.5 CPUs beats 2, though both count 2), the innermost of equals.
TEST(CgroupCpuQuota, TheQuotaSaysWhereItWasRead) {
  const std::string cgroup = "0::/pod/c1\n";
  CpuQuota q = cgroup_cpu_quota(cgroup, kV2Mountinfo,
                                files({{"/sys/fs/cgroup/pod/c1/cpu.max", "200000 100000"},
                                       {"/sys/fs/cgroup/pod/cpu.max", "150000 100000"}}));
  EXPECT_EQ(q.cpus, 2);
  EXPECT_EQ(q.quota_us, 150000u);
  EXPECT_EQ(q.period_us, 100000u);
  EXPECT_EQ(q.folder, "/sys/fs/cgroup/pod");
  EXPECT_EQ(q.describe(), "2: 150000/100000 us at /sys/fs/cgroup/pod");
  q = cgroup_cpu_quota(cgroup, kV2Mountinfo,
                       files({{"/sys/fs/cgroup/pod/c1/cpu.max", "100000 100000"},
                              {"/sys/fs/cgroup/pod/cpu.max", "50000 50000"}}));
  EXPECT_EQ(q.folder, "/sys/fs/cgroup/pod/c1");
  const std::string v1 = "1:cpu:/job\n";
  q = cgroup_cpu_quota(v1, kHybridMountinfo,
                       files({{"/sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "50000\n"},
                              {"/sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n"}}));
  EXPECT_EQ(q.describe(), "1: 50000/100000 us at /sys/fs/cgroup/cpu/job");
  q = cgroup_cpu_quota(v1, kHybridMountinfo, files({}));
  EXPECT_EQ(q.cpus, 0);
  EXPECT_EQ(q.describe(), "none");
}

}  // namespace
}  // namespace shm
}  // namespace distcomm
