// The device reaches a container: the real migd on simulated GPUs allocates
// MIG instances, and podman 4.3.1 (which reads CDI specs through the CDI Go
// library 0.5.2 from /etc/cdi and /var/run/cdi) injects them into containers
// run by runc and by crun. Checked inside the container: the GI and CI
// capability nodes with the majors/minors of the simulator's /proc, the
// parent GPU and control nodes, the spec's environment, and the driver files
// of a node spec of kind nvidia.com/gpu (the common edits migd detects).
//
// migd writes to the host's /var/run/cdi (cdi.specDir set explicitly to the
// default, which --simulate must honour) under a vendor unique to this run,
// and removes its files at the end. podman uses storage of its own in a
// temporary directory. The test needs root; it skips only where podman cannot
// run a container at all, and fails if podman, runc, crun or busybox are
// missing (scripts/install-deps.sh runtime-e2e installs them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"
#include "testing/subprocess.h"
#include "testing/temp_dir.h"

namespace migd {
namespace {

namespace fs = std::filesystem;
using ::migd::testing::CommandResult;
using ::migd::testing::DaemonOptions;
using ::migd::testing::DaemonProcess;
using ::migd::testing::RunCommand;
using ::migd::testing::TempDir;
using ::migd::testing::WriteFileOrDie;
using ::testing::Contains;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kRuntimeSpecDir[] = "/var/run/cdi";
constexpr char kDriverVersion[] = "580.95.05";
const char* const kTools[] = {"/usr/bin/podman", "/usr/sbin/runc", "/usr/bin/crun",
                              "/bin/busybox"};

// One line per node: "<path> <type> <major> <minor>" as busybox stat prints
// them (major/minor in hex, as stat's %t/%T do).
struct NodeLine {
  std::string type;
  uint64_t major = 0;
  uint64_t minor = 0;
};

class PodmanE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    for (const char* tool : kTools) {
      if (::access(tool, X_OK) != 0) {
        setup_error_ = std::string(tool) +
                       " is missing: install podman, runc, crun and busybox-static "
                       "(scripts/install-deps.sh runtime-e2e; `make check` does)";
        return;
      }
    }
    if (::geteuid() != 0) {
      skip_reason_ = "podman runs rootful here and this test is not root";
      return;
    }
    dir_ = new TempDir();
    vendor_ = "e2e" + std::to_string(::getpid()) + ".migd.test";
    if (!BuildImage()) return;
    WriteDriverTree();
    StartMigd();
  }

  static void TearDownTestSuite() {
    if (daemon_ != nullptr) {
      daemon_->Signal(SIGTERM);
      daemon_->WaitForExit();
      daemon_.reset();
    }
    // migd keeps the specs of Active and Idle instances; they are this run's.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(kRuntimeSpecDir, ec)) {
      if (e.path().filename().string().starts_with(vendor_ + "-")) fs::remove(e.path(), ec);
    }
    if (dir_ != nullptr) {
      Podman({"rmi", "-f", kImage});
      // vfs layers are plain directories; the temporary directory goes with them.
      delete dir_;
      dir_ = nullptr;
    }
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    if (!skip_reason_.empty()) GTEST_SKIP() << skip_reason_;
    ASSERT_NE(daemon_, nullptr) << "migd did not start";
  }

  // Whether the host mounts cgroup v2 beside the v1 hierarchies ("hybrid":
  // /sys/fs/cgroup a tmpfs of v1 mounts, cgroup2 at /sys/fs/cgroup/unified).
  // crun 1.8 (Debian 12) refuses every container there ("cgroups in hybrid
  // mode not supported"), with or without --cgroups=disabled.
  static bool HybridCgroups() {
    std::ifstream mounts("/proc/self/mounts");
    for (std::string line; std::getline(mounts, line);) {
      if (line.find(" /sys/fs/cgroup/unified cgroup2 ") != std::string::npos) return true;
    }
    return false;
  }

  // podman with storage of its own and the runtime of the test. On a hybrid
  // host, crun runs in a private mount namespace without the cgroup2 mount,
  // where it sees the plain v1 layout it supports; the host is not changed.
  static CommandResult Podman(std::vector<std::string> args, const std::string& runtime = "runc") {
    std::vector<std::string> argv;
    if (runtime == "crun" && HybridCgroups()) {
      argv = {"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
              "umount /sys/fs/cgroup/unified && exec \"$@\"", "sh"};
    }
    const std::vector<std::string> podman = {
        "/usr/bin/podman",      "--root",           dir_->Join("storage"),
        "--runroot",            dir_->Join("runroot"),
        "--tmpdir",             dir_->Join("libpod-tmp"),
        "--storage-driver",     "vfs",
        "--cgroup-manager",     "cgroupfs",
        "--events-backend",     "file",
        "--runtime",            "/usr/" + std::string(runtime == "runc" ? "sbin" : "bin") + "/" +
                                    runtime};
    argv.insert(argv.end(), podman.begin(), podman.end());
    argv.insert(argv.end(), args.begin(), args.end());
    fs::create_directories(dir_->Join("scratch"));
    return RunCommand(argv, dir_->Join("scratch"));
  }

  // `podman run` of a shell command with CDI devices and extra flags.
  static CommandResult Run(const std::vector<std::string>& devices, const std::string& script,
                           const std::string& runtime = "runc",
                           const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"run",      "--rm",         "--network",
                                     "none",     "--ulimit",     "nofile=1024:1024",
                                     "--ulimit", "nproc=1024:1024"};
    for (const std::string& d : devices) {
      args.push_back("--device");
      args.push_back(d);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {kImage, "/bin/sh", "-c", script});
    return Podman(args, runtime);
  }

  static CommandResult Migctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {MIGD_MIGCTL, "--socket", dir_->Join("api.socket")};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, dir_->Join("scratch"));
  }

  // Allocates one instance; returns the JSON response.
  static Json Allocate(const std::string& id, const std::string& profile) {
    CommandResult r = Migctl({"allocate", "--id", id, "--owner", id, profile, "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (r.exit_code != 0) return Json::object();
    return Json::parse(r.out);
  }

  static std::string CdiName(const Json& allocation) {
    const Json& names = allocation.value("cdiDevices", Json::array());
    return names.empty() ? std::string() : names[0].get<std::string>();
  }

  // The spec file migd wrote for `cdi_name` ("<vendor>/mig=<uuid>").
  static Json SpecFile(const std::string& cdi_name) {
    const std::string device = cdi_name.substr(cdi_name.find('=') + 1);
    StatusOr<std::string> text = ReadFileToString(std::string(kRuntimeSpecDir) + "/" + vendor_ +
                                                  "-mig_" + device + ".json");
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? Json::parse(*text) : Json::object();
  }

  // "<major> <name>" from the simulator's /proc/devices.
  static uint64_t SimMajor(const std::string& name) {
    StatusOr<std::string> text = ReadFileToString(SimProcRoot() + "/devices");
    EXPECT_TRUE(text.ok()) << text.status();
    std::istringstream in(text.ok() ? *text : "");
    bool chars = false;
    for (std::string line; std::getline(in, line);) {
      if (line == "Character devices:") chars = true;
      if (line == "Block devices:") chars = false;
      std::istringstream f(line);
      uint64_t major = 0;
      std::string n;
      if (chars && (f >> major >> n) && n == name) return major;
    }
    ADD_FAILURE() << "no " << name << " in the simulator's /proc/devices";
    return 0;
  }

  // DeviceFileMinor of the simulator's access file of a GI or CI.
  static uint64_t SimCapMinor(uint32_t gpu_minor, uint32_t gi, std::optional<uint32_t> ci) {
    std::string path = SimProcRoot() + "/driver/nvidia/capabilities/gpu" +
                       std::to_string(gpu_minor) + "/mig/gi" + std::to_string(gi);
    if (ci) path += "/ci" + std::to_string(*ci);
    StatusOr<std::string> text = ReadFileToString(path + "/access");
    EXPECT_TRUE(text.ok()) << text.status();
    std::istringstream in(text.ok() ? *text : "");
    for (std::string key; in >> key;) {
      uint64_t value = 0;
      if (in >> value && key == "DeviceFileMinor:") return value;
    }
    ADD_FAILURE() << "no DeviceFileMinor in " << path;
    return 0;
  }

  static Json SimState() {
    StatusOr<std::string> text = ReadFileToString(dir_->Join("sim/state.json"));
    EXPECT_TRUE(text.ok()) << text.status();
    return text.ok() ? Json::parse(*text) : Json::object();
  }
  static std::string SimProcRoot() { return SimState().value("procRoot", std::string()); }
  static uint32_t SimGpuMinor(uint32_t gpu_index) {
    const Json state = SimState();
    for (const Json& g : state.value("gpus", Json::array())) {
      if (g.value("index", 99u) == gpu_index) return g.value("minor", 0u);
    }
    ADD_FAILURE() << "no GPU " << gpu_index << " in the simulator state";
    return 0;
  }

  // `stat` of each path inside the container, by path.
  static std::map<std::string, NodeLine> ParseNodes(const std::string& out) {
    std::map<std::string, NodeLine> nodes;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      std::istringstream f(line);
      std::string tag, path, type, major, minor;
      if (!(f >> tag >> path >> type >> major >> minor) || tag != "node") continue;
      nodes[path] = NodeLine{type, std::stoull(major, nullptr, 16), std::stoull(minor, nullptr, 16)};
    }
    return nodes;
  }

  static std::set<std::string> ParseEnv(const std::string& out) {
    std::set<std::string> env;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("env ")) env.insert(line.substr(4));
    }
    return env;
  }

  // Checks the container's view of an allocated instance against the
  // simulator's /proc (not against migd's spec alone).
  static void ExpectInstanceInContainer(const Json& allocation, const std::string& out,
                                 const std::map<std::string, NodeLine>& nodes) {
    const Json& inst = allocation["instances"][0]["instance"];
    const uint32_t gpu_minor = SimGpuMinor(inst.value("gpuIndex", 0u));
    const uint64_t caps_major = SimMajor("nvidia-caps");
    const uint64_t gi_minor = SimCapMinor(gpu_minor, inst.value("giId", 0u), {});
    const uint64_t ci_minor =
        SimCapMinor(gpu_minor, inst.value("giId", 0u), inst.value("ciId", 0u));
    for (uint64_t minor : {gi_minor, ci_minor}) {
      const std::string path = "/dev/nvidia-caps/nvidia-cap" + std::to_string(minor);
      ASSERT_TRUE(nodes.contains(path)) << path << " missing in the container:\n" << out;
      EXPECT_EQ(nodes.at(path).type, "c") << path;
      EXPECT_EQ(nodes.at(path).major, caps_major) << path;
      EXPECT_EQ(nodes.at(path).minor, minor) << path;
    }
    const std::string gpu = "/dev/nvidia" + std::to_string(gpu_minor);
    ASSERT_TRUE(nodes.contains(gpu)) << gpu << " missing:\n" << out;
    EXPECT_EQ(nodes.at(gpu).major, 195u);
    EXPECT_EQ(nodes.at(gpu).minor, gpu_minor);
    for (const char* control : {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}) {
      EXPECT_TRUE(nodes.contains(control)) << control << " missing:\n" << out;
    }
    EXPECT_EQ(nodes.at("/dev/nvidiactl").minor, 255u);
    // Only this instance's capabilities: two nodes under /dev/nvidia-caps.
    int caps = 0;
    for (const auto& [path, unused] : nodes) caps += path.starts_with("/dev/nvidia-caps/") ? 1 : 0;
    EXPECT_EQ(caps, 2) << out;
  }

  static constexpr char kImage[] = "localhost/migd-runtime-e2e:busybox";
  static constexpr char kInspect[] =
      "for f in /dev/nvidia* /dev/nvidia-caps/*; do "
      "  [ -e \"$f\" ] && [ ! -d \"$f\" ] && echo \"node $f $(stat -c '%F %t %T' \"$f\" | "
      "    sed 's/character special file/c/')\"; "
      "done; env | sed 's/^/env /'";

  static TempDir* dir_;
  static std::string vendor_;
  static std::string setup_error_;
  static std::string skip_reason_;
  static std::unique_ptr<DaemonProcess> daemon_;

 private:
  // A busybox-static root file system imported as an image (no registry).
  static bool BuildImage() {
    const std::string root = dir_->Join("rootfs");
    fs::create_directories(root + "/bin");
    fs::copy_file("/bin/busybox", root + "/bin/busybox");
    for (const char* tool : {"sh", "ls", "cat", "env", "stat", "sed", "echo", "test", "["}) {
      fs::create_symlink("busybox", root + "/bin/" + tool);
    }
    fs::create_directories(root + "/dev");
    fs::create_directories(root + "/usr/lib/x86_64-linux-gnu");
    CommandResult tar =
        RunCommand({"/bin/sh", "-c",
                    "tar -C '" + root + "' -c . > '" + dir_->Join("rootfs.tar") + "'"},
                   dir_->path());
    if (tar.exit_code != 0) {
      setup_error_ = "tar of the root file system failed: " + tar.err;
      return false;
    }
    CommandResult import = Podman({"import", dir_->Join("rootfs.tar"), kImage});
    if (import.exit_code != 0) {
      skip_reason_ = "podman cannot import an image here: " + import.err;
      return false;
    }
    CommandResult probe = Run({}, "true");
    if (probe.exit_code != 0) {
      skip_reason_ = "podman cannot run a container here (" + probe.err +
                     "); the CDI injection checks need a working container runtime";
      return false;
    }
    return true;
  }

  // The driver files a CUDA container needs, and a node spec in the layout of
  // `nvidia-ctk cdi generate` (kind nvidia.com/gpu, spec-level
  // containerEdits) naming them. Under --simulate migd looks for node specs
  // under <simulation dir>/host/ instead of the host's /etc/cdi and
  // /var/run/cdi (docs/simulator.md).
  static void WriteDriverTree() {
    const std::string lib = dir_->Join("driver/usr/lib/x86_64-linux-gnu");
    fs::create_directories(lib);
    WriteFileOrDie(lib + "/libcuda.so." + kDriverVersion, std::string("fake libcuda ") +
                                                             kDriverVersion + "\n");
    WriteFileOrDie(lib + "/libnvidia-ml.so." + kDriverVersion, "fake libnvidia-ml\n");
    Json mounts = Json::array();
    for (const std::string name : {"libcuda.so.", "libnvidia-ml.so."}) {
      const std::string file = name + kDriverVersion;
      mounts.push_back({{"hostPath", lib + "/" + file},
                        {"containerPath", "/usr/lib/x86_64-linux-gnu/" + file},
                        {"options", {"ro", "nosuid", "nodev", "bind"}}});
    }
    Json spec = {
        {"cdiVersion", "0.5.0"},
        {"kind", "nvidia.com/gpu"},
        {"devices",
         {{{"name", "0"}, {"containerEdits", {{"deviceNodes", {{{"path", "/dev/nvidia0"}}}}}}}}},
        {"containerEdits",
         {{"env", {"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_CTK_TEST_DRIVER=" + std::string(kDriverVersion)}},
          {"hooks",
           {{{"hookName", "createRuntime"},
             {"path", "/bin/sh"},
             {"args", {"sh", "-c", "echo ran >> " + dir_->Join("hook-runs")}}}}},
          {"mounts", mounts}}}};
    fs::create_directories(dir_->Join("sim/host/var/run/cdi"));
    WriteFileOrDie(dir_->Join("sim/host/var/run/cdi/nvidia.json"), spec.dump(2));
  }

  static void StartMigd() {
    const std::string config = dir_->Join("migd.yaml");
    WriteFileOrDie(config, "cdi:\n  specDir: " + std::string(kRuntimeSpecDir) +
                               "\n  vendor: " + vendor_ + "\n");
    ::chmod(config.c_str(), 0600);
    fs::create_directories(dir_->Join("sim"));
    DaemonOptions opts;
    opts.args = {"--config",    config,
                 "--simulate",  "a100-40gb:1,h100-80gb:1",
                 "--socket",    dir_->Join("api.socket"),
                 "--state-dir", dir_->Join("state"),
                 "--metrics-listen", ""};
    opts.env = {{"MIGD_SIM_STATE", dir_->Join("sim/state.json")}};
    opts.socket_path = dir_->Join("api.socket");
    StatusOr<std::unique_ptr<DaemonProcess>> d = DaemonProcess::Start(opts, dir_->path());
    if (!d.ok()) {
      setup_error_ = "migd did not start: " + d.status().ToString();
      return;
    }
    daemon_ = std::move(*d);
  }
};

TempDir* PodmanE2eTest::dir_ = nullptr;
std::string PodmanE2eTest::vendor_;
std::string PodmanE2eTest::setup_error_;
std::string PodmanE2eTest::skip_reason_;
std::unique_ptr<DaemonProcess> PodmanE2eTest::daemon_;

class PodmanInjectionTest : public PodmanE2eTest,
                            public ::testing::WithParamInterface<std::string> {};

TEST_P(PodmanInjectionTest, AllocatedDeviceReachesTheContainer) {
  if (CommandResult probe = Run({}, "true", GetParam()); probe.exit_code != 0) {
    FAIL() << GetParam() << " cannot run a container: " << probe.err;
  }
  const Json allocation = Allocate("inject-" + GetParam(), "1g.5gb");
  const std::string name = CdiName(allocation);
  ASSERT_THAT(name, HasSubstr(vendor_ + "/mig=MIG-"));
  CommandResult r = Run({name}, kInspect, GetParam());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectInstanceInContainer(allocation, r.out, ParseNodes(r.out));
  // The environment is the spec's: every env entry of its edits is set.
  const std::set<std::string> env = ParseEnv(r.out);
  const Json spec = SpecFile(name);
  for (const Json& e : spec["containerEdits"]["env"]) {
    EXPECT_THAT(env, Contains(e.get<std::string>())) << r.out;
  }
  EXPECT_THAT(env, Contains("NVIDIA_VISIBLE_DEVICES=void"));
}

INSTANTIATE_TEST_SUITE_P(Runtimes, PodmanInjectionTest, ::testing::Values("runc", "crun"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_F(PodmanE2eTest, DriverFilesOfTheNodeSpecReachTheContainer) {
  const Json allocation = Allocate("driver", "1g.5gb");
  const std::string name = CdiName(allocation);
  ASSERT_FALSE(name.empty());
  const std::string lib = std::string("/usr/lib/x86_64-linux-gnu/libcuda.so.") + kDriverVersion;
  CommandResult r = Run({name}, "cat " + lib + "; " + kInspect);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(std::string("fake libcuda ") + kDriverVersion));
  EXPECT_THAT(ParseEnv(r.out),
              Contains(std::string("NVIDIA_CTK_TEST_DRIVER=") + kDriverVersion));
  // The node spec's hook ran (once per container).
  StatusOr<std::string> hooks = ReadFileToString(dir_->Join("hook-runs"));
  ASSERT_TRUE(hooks.ok()) << "the node spec's createRuntime hook did not run";
  // migd took only the spec-level edits: that spec's device "0" is not ours.
  const Json spec = SpecFile(name);
  EXPECT_EQ(spec["devices"].size(), 1u);
  EXPECT_NE(spec["devices"][0]["name"], "0");
}

TEST_F(PodmanE2eTest, ReleasedInstanceStillInjects) {
  const Json allocation = Allocate("release", "1g.5gb");
  const std::string name = CdiName(allocation);
  ASSERT_FALSE(name.empty());
  CommandResult released = Migctl({"release", "--id", "release"});
  ASSERT_EQ(released.exit_code, 0) << released.err;
  // Idle keeps its spec: the same name still injects the same nodes.
  CommandResult r = Run({name}, kInspect);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectInstanceInContainer(allocation, r.out, ParseNodes(r.out));
}

TEST_F(PodmanE2eTest, ReclaimedInstanceIsRefused) {
  const Json allocation = Allocate("reclaim", "2g.20gb");  // the H100: nothing else there
  const std::string name = CdiName(allocation);
  ASSERT_FALSE(name.empty());
  ASSERT_EQ(Migctl({"release", "--id", "reclaim"}).exit_code, 0);
  const uint32_t gpu = allocation["instances"][0]["instance"].value("gpuIndex", 0u);
  CommandResult reclaimed =
      Migctl({"reclaim", "--gpu", std::to_string(gpu), "--profile", "2g.20gb"});
  ASSERT_EQ(reclaimed.exit_code, 0) << reclaimed.out << reclaimed.err;
  CommandResult r = Run({name}, "true");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("unresolvable CDI devices " + name));
}

TEST_F(PodmanE2eTest, LegacyVisibleDevicesReachTheContainer) {
  const Json allocation = Allocate("legacy", "1g.5gb");
  std::string visible;
  for (const Json& e : allocation.value("envs", Json::array())) {
    if (e.value("name", "") == "NVIDIA_VISIBLE_DEVICES") visible = e.value("value", "");
  }
  ASSERT_THAT(visible, HasSubstr("MIG-"));
  EXPECT_EQ(visible, allocation["instances"][0]["instance"].value("migUuid", ""));
  // Without CDI (what kubelet does with the legacy env): the container sees it.
  CommandResult legacy =
      Run({}, "env | sed 's/^/env /'", "runc", {"--env", "NVIDIA_VISIBLE_DEVICES=" + visible});
  ASSERT_EQ(legacy.exit_code, 0) << legacy.err;
  EXPECT_THAT(ParseEnv(legacy.out), Contains("NVIDIA_VISIBLE_DEVICES=" + visible));
  // With both, the spec's "void" wins, so a legacy NVIDIA hook injects nothing
  // on top of the CDI devices (cdi/publisher.h).
  CommandResult both = Run({CdiName(allocation)}, "env | sed 's/^/env /'", "runc",
                           {"--env", "NVIDIA_VISIBLE_DEVICES=" + visible});
  ASSERT_EQ(both.exit_code, 0) << both.err;
  EXPECT_THAT(ParseEnv(both.out), Contains("NVIDIA_VISIBLE_DEVICES=void"));
}

}  // namespace
}  // namespace migd
