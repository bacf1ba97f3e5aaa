#include "scheduler/node_inventory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tarn::scheduler {
namespace {

namespace fs = std::filesystem;

void ExpectErrorContains(const Status& status, StatusCode code, const std::string& part) {
  EXPECT_EQ(status.code(), code) << status.ToString();
  EXPECT_NE(status.message().find(part), std::string::npos)
      << "message \"" << status.message() << "\" lacks \"" << part << "\"";
}

// ---------------------------------------------------------------------------------------
// ParseNvidiaSmiCsv

TEST(ParseNvidiaSmiCsvTest, TwoH200s) {
  auto gpus = ParseNvidiaSmiCsv("0, NVIDIA H200, 143771\n1, NVIDIA H200, 143771\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus,
            (std::vector<GpuDevice>{{0, "NVIDIA H200", 143771}, {1, "NVIDIA H200", 143771}}));
}

TEST(ParseNvidiaSmiCsvTest, NoTrailingNewline) {
  auto gpus = ParseNvidiaSmiCsv("0, Tesla T4, 15360");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<GpuDevice>{{0, "Tesla T4", 15360}}));
}

TEST(ParseNvidiaSmiCsvTest, TrailingSpacesCrlfAndBlankLines) {
  auto gpus = ParseNvidiaSmiCsv(
      "\r\n  0 ,  NVIDIA A100-SXM4-80GB ,  81920  \r\n\r\n\n\t1,NVIDIA A100-SXM4-80GB,81920\t\r\n"
      "   \n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<GpuDevice>{{0, "NVIDIA A100-SXM4-80GB", 81920},
                                           {1, "NVIDIA A100-SXM4-80GB", 81920}}));
}

TEST(ParseNvidiaSmiCsvTest, KeepsOutputOrderAndIndices) {
  // Indices as nvidia-smi prints them (e.g. with CUDA_VISIBLE_DEVICES-independent numbering).
  auto gpus = ParseNvidiaSmiCsv("3, NVIDIA L4, 23034\n1, NVIDIA L4, 23034\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<GpuDevice>{{3, "NVIDIA L4", 23034}, {1, "NVIDIA L4", 23034}}));
}

TEST(ParseNvidiaSmiCsvTest, NameMayContainCommas) {
  // The index is before the first comma and the memory after the last one.
  auto gpus = ParseNvidiaSmiCsv("0, Some GPU, Rev 2, 8192\n");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  EXPECT_EQ(*gpus, (std::vector<GpuDevice>{{0, "Some GPU, Rev 2", 8192}}));
}

TEST(ParseNvidiaSmiCsvTest, EmptyOutputMeansNoGpus) {
  for (const char* text : {"", "\n", "\r\n\r\n", "  \n\t\n"}) {
    auto gpus = ParseNvidiaSmiCsv(text);
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    EXPECT_TRUE(gpus->empty());
  }
}

TEST(ParseNvidiaSmiCsvTest, LineWithoutTwoCommasIsAnError) {
  ExpectErrorContains(ParseNvidiaSmiCsv("0 NVIDIA H200 143771\n").status(),
                      StatusCode::kInvalidArgument, "line 1: expected index, name, memory");
  ExpectErrorContains(ParseNvidiaSmiCsv("0, 143771\n").status(), StatusCode::kInvalidArgument,
                      "line 1: expected index, name, memory");
}

TEST(ParseNvidiaSmiCsvTest, ErrorNamesTheLineNumberCountingBlankLines) {
  ExpectErrorContains(
      ParseNvidiaSmiCsv("0, NVIDIA H200, 143771\n\nNo devices were found\n").status(),
      StatusCode::kInvalidArgument, "line 3");
}

TEST(ParseNvidiaSmiCsvTest, NonNumericFieldsAreErrors) {
  ExpectErrorContains(ParseNvidiaSmiCsv("x, NVIDIA H200, 143771\n").status(),
                      StatusCode::kInvalidArgument, "line 1: x, NVIDIA H200, 143771");
  ExpectErrorContains(ParseNvidiaSmiCsv("0, NVIDIA H200, [N/A]\n").status(),
                      StatusCode::kInvalidArgument, "line 1: 0, NVIDIA H200, [N/A]");
  // With units (the query must use nounits).
  ExpectErrorContains(ParseNvidiaSmiCsv("0, NVIDIA H200, 143771 MiB\n").status(),
                      StatusCode::kInvalidArgument, "line 1");
  ExpectErrorContains(ParseNvidiaSmiCsv("1.5, NVIDIA H200, 143771\n").status(),
                      StatusCode::kInvalidArgument, "line 1");
  ExpectErrorContains(ParseNvidiaSmiCsv(", NVIDIA H200, 143771\n").status(),
                      StatusCode::kInvalidArgument, "line 1");
}

TEST(ParseNvidiaSmiCsvTest, NegativeIndexIsAnError) {
  ExpectErrorContains(ParseNvidiaSmiCsv("-1, NVIDIA H200, 143771\n").status(),
                      StatusCode::kInvalidArgument, "line 1");
}

// ---------------------------------------------------------------------------------------
// ParseMemTotalKib

constexpr char kMeminfo[] =
    "MemTotal:       263782140 kB\n"
    "MemFree:        12345678 kB\n"
    "MemAvailable:   200000000 kB\n"
    "Buffers:          523412 kB\n"
    "Cached:         180234112 kB\n"
    "SwapCached:            0 kB\n"
    "HugePages_Total:       0\n"
    "Hugepagesize:       2048 kB\n";

TEST(ParseMemTotalKibTest, RealisticMeminfo) {
  auto kib = ParseMemTotalKib(kMeminfo);
  ASSERT_TRUE(kib.ok()) << kib.status().ToString();
  EXPECT_EQ(*kib, 263782140);
}

TEST(ParseMemTotalKibTest, MemTotalNotOnFirstLineAndWithoutNewline) {
  auto kib = ParseMemTotalKib("MemFree: 1 kB\nMemTotal:\t16384000 kB");
  ASSERT_TRUE(kib.ok()) << kib.status().ToString();
  EXPECT_EQ(*kib, 16384000);
}

TEST(ParseMemTotalKibTest, MissingLineIsAnError) {
  ExpectErrorContains(ParseMemTotalKib("MemFree: 1 kB\nMemAvailable: 2 kB\n").status(),
                      StatusCode::kInvalidArgument, "no MemTotal line");
  ExpectErrorContains(ParseMemTotalKib("").status(), StatusCode::kInvalidArgument,
                      "no MemTotal line");
}

TEST(ParseMemTotalKibTest, OtherUnitIsAnError) {
  ExpectErrorContains(ParseMemTotalKib("MemTotal: 16000 MB\n").status(),
                      StatusCode::kInvalidArgument, "not in kB");
  ExpectErrorContains(ParseMemTotalKib("MemTotal: 16384000\nMemFree: 1 kB\n").status(),
                      StatusCode::kInvalidArgument, "not in kB");
  ExpectErrorContains(ParseMemTotalKib("MemTotal:\n").status(), StatusCode::kInvalidArgument,
                      "not in kB");
}

TEST(ParseMemTotalKibTest, UnreadableNumberIsAnError) {
  ExpectErrorContains(ParseMemTotalKib("MemTotal: lots kB\n").status(),
                      StatusCode::kInvalidArgument, "unreadable MemTotal");
  ExpectErrorContains(ParseMemTotalKib("MemTotal: 0 kB\n").status(), StatusCode::kInvalidArgument,
                      "unreadable MemTotal");
  ExpectErrorContains(ParseMemTotalKib("MemTotal: -5 kB\n").status(), StatusCode::kInvalidArgument,
                      "unreadable MemTotal");
}

// ---------------------------------------------------------------------------------------
// FakeGpus

TEST(FakeGpusTest, IndicesNameAndSixteenGib) {
  EXPECT_EQ(FakeGpus(3),
            (std::vector<GpuDevice>{
                {0, "Fake GPU", 16384}, {1, "Fake GPU", 16384}, {2, "Fake GPU", 16384}}));
  EXPECT_TRUE(FakeGpus(0).empty());
}

// ---------------------------------------------------------------------------------------
// Tests that need a directory: a fake /proc and fake nvidia-smi scripts.

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::path base = fs::temp_directory_path() / "tarn_node_inventory_test.XXXXXX";
    std::string templ = base.string();
    ASSERT_NE(::mkdtemp(templ.data()), nullptr) << "mkdtemp " << templ;
    dir_ = templ;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }

  // Writes `text` to dir_/relative, creating parent directories.
  std::string Write(const std::string& relative, const std::string& text) {
    fs::path path = fs::path(dir_) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << text;
    out.close();
    EXPECT_TRUE(out.good()) << "writing " << path;
    return path.string();
  }

  // Writes an executable shell script and returns its path.
  std::string WriteScript(const std::string& name, const std::string& body) {
    std::string path = Write(name, "#!/bin/sh\n" + body);
    EXPECT_EQ(::chmod(path.c_str(), 0755), 0);
    return path;
  }

  // A GPU's information file as the NVIDIA driver writes it.
  void WriteProcGpu(const std::string& bus, const std::string& model,
                    const std::string& minor_line) {
    Write("proc/driver/nvidia/gpus/" + bus + "/information",
          "Model: \t\t " + model +
              "\n"
              "IRQ:   \t\t 150\n"
              "GPU UUID: \t GPU-5c5a1f2e-0000-1111-2222-333344445555\n"
              "Video BIOS: \t 92.00.45.00.03\n"
              "Bus Type: \t PCIe\n"
              "DMA Size: \t 47 bits\n"
              "DMA Mask: \t 0x7fffffffffff\n"
              "Bus Location: \t " +
              bus + "\n" + minor_line + "GPU Excluded:\t No\n");
  }

  std::string proc() const { return dir_ + "/proc"; }

  std::string dir_;
};

using ReadProcNvidiaGpusTest = TempDirTest;

TEST_F(ReadProcNvidiaGpusTest, ReadsModelAndMinorSortedByIndex) {
  // Directory order is arbitrary; the minors are given out of bus order on purpose.
  WriteProcGpu("0000:3b:00.0", "NVIDIA A100-SXM4-80GB", "Device Minor: \t 1\n");
  WriteProcGpu("0000:86:00.0", "NVIDIA A100-SXM4-80GB", "Device Minor: \t 2\n");
  WriteProcGpu("0000:18:00.0", "NVIDIA A100-SXM4-40GB", "Device Minor: \t 0\n");
  std::vector<GpuDevice> gpus = ReadProcNvidiaGpus(proc());
  // The driver's information file has no memory size: 0.
  EXPECT_EQ(gpus, (std::vector<GpuDevice>{{0, "NVIDIA A100-SXM4-40GB", 0},
                                          {1, "NVIDIA A100-SXM4-80GB", 0},
                                          {2, "NVIDIA A100-SXM4-80GB", 0}}));
}

TEST_F(ReadProcNvidiaGpusTest, SkipsEntriesWithoutDeviceMinorOrInformation) {
  WriteProcGpu("0000:3b:00.0", "NVIDIA H200", "Device Minor: \t 0\n");
  WriteProcGpu("0000:86:00.0", "NVIDIA H200", "");                            // no minor
  WriteProcGpu("0000:af:00.0", "NVIDIA H200", "Device Minor: \t unknown\n");  // unreadable
  fs::create_directories(proc() + "/driver/nvidia/gpus/0000:d8:00.0");        // no file
  std::vector<GpuDevice> gpus = ReadProcNvidiaGpus(proc());
  EXPECT_EQ(gpus, (std::vector<GpuDevice>{{0, "NVIDIA H200", 0}}));
}

TEST_F(ReadProcNvidiaGpusTest, NoDriverDirectoryMeansNoGpus) {
  EXPECT_TRUE(ReadProcNvidiaGpus(proc()).empty());
  EXPECT_TRUE(ReadProcNvidiaGpus(dir_ + "/does-not-exist").empty());
  fs::create_directories(proc() + "/driver/nvidia/gpus");
  EXPECT_TRUE(ReadProcNvidiaGpus(proc()).empty());
}

// ---------------------------------------------------------------------------------------
// DetectLocalNode

class DetectLocalNodeTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // 16384000 kB = 16000 MiB exactly.
    Write("proc/meminfo",
          "MemTotal:       16384000 kB\n"
          "MemFree:         8000000 kB\n"
          "MemAvailable:   12000000 kB\n");
    options_.name = "node-a";
    options_.proc_root = proc();
    options_.nvidia_smi = "";
    options_.fake_gpus = 2;
  }

  InventoryOptions options_;
};

TEST_F(DetectLocalNodeTest, MemoryIsMemTotalMinusReserve) {
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->name, "node-a");
  EXPECT_EQ(node->memory_mib, 16000 - 1024);  // default reserve 1024 MiB
  EXPECT_GE(node->vcores, 1);
  EXPECT_EQ(node->gpus, FakeGpus(2));
  EXPECT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(node->capacity(), (Resources{node->vcores, 14976, 2}));
}

TEST_F(DetectLocalNodeTest, ReserveIsConfigurable) {
  options_.reserve_mib = 4000;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->memory_mib, 12000);
  options_.reserve_mib = 0;
  node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->memory_mib, 16000);
}

TEST_F(DetectLocalNodeTest, MemTotalIsRoundedDownToMib) {
  // 16385023 kB = 16000 MiB + 1023 KiB -> 16000 MiB.
  Write("proc/meminfo", "MemTotal:       16385023 kB\n");
  options_.reserve_mib = 0;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->memory_mib, 16000);
}

TEST_F(DetectLocalNodeTest, ReserveLargerThanMemoryGivesZero) {
  Write("proc/meminfo", "MemTotal:       512000 kB\n");  // 500 MiB
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->memory_mib, 0);
}

TEST_F(DetectLocalNodeTest, ConfiguredVcoresAndMemoryOverrideDetection) {
  options_.vcores = 6;
  options_.memory_mib = 4096;  // taken as is: no reserve
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->vcores, 6);
  EXPECT_EQ(node->memory_mib, 4096);
}

TEST_F(DetectLocalNodeTest, ConfiguredMemoryNeedsNoMeminfo) {
  options_.proc_root = dir_ + "/empty-proc";
  options_.memory_mib = 2048;
  options_.fake_gpus = 0;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->memory_mib, 2048);
  EXPECT_TRUE(node->gpus.empty());
}

TEST_F(DetectLocalNodeTest, MissingMeminfoIsAnError) {
  options_.proc_root = dir_ + "/empty-proc";
  EXPECT_FALSE(DetectLocalNode(options_).ok());
}

TEST_F(DetectLocalNodeTest, BadMeminfoIsAnError) {
  Write("proc/meminfo", "MemFree: 1 kB\n");
  ExpectErrorContains(DetectLocalNode(options_).status(), StatusCode::kInvalidArgument, "MemTotal");
}

TEST_F(DetectLocalNodeTest, ZeroVcoresIsAnError) {
  options_.vcores = 0;
  ExpectErrorContains(DetectLocalNode(options_).status(), StatusCode::kInvalidArgument,
                      "no vcores");
}

TEST_F(DetectLocalNodeTest, EmptyNameMeansHostName) {
  options_.name = "";
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_FALSE(node->name.empty());
}

TEST_F(DetectLocalNodeTest, FakeGpusWinOverProcGpus) {
  WriteProcGpu("0000:3b:00.0", "NVIDIA H200", "Device Minor: \t 0\n");
  options_.fake_gpus = 0;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_TRUE(node->gpus.empty());
}

TEST_F(DetectLocalNodeTest, WithoutNvidiaSmiGpusComeFromProc) {
  WriteProcGpu("0000:86:00.0", "NVIDIA H200", "Device Minor: \t 1\n");
  WriteProcGpu("0000:3b:00.0", "NVIDIA H200", "Device Minor: \t 0\n");
  options_.fake_gpus = -1;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->gpus, (std::vector<GpuDevice>{{0, "NVIDIA H200", 0}, {1, "NVIDIA H200", 0}}));
}

TEST_F(DetectLocalNodeTest, GpusComeFromNvidiaSmi) {
  // The script answers only the query DetectLocalNode documents, so a changed query fails.
  options_.nvidia_smi =
      WriteScript("nvidia-smi",
                  "[ \"$1\" = --query-gpu=index,name,memory.total ] || exit 2\n"
                  "[ \"$2\" = --format=csv,noheader,nounits ] || exit 2\n"
                  "printf '0, NVIDIA H200, 143771\\n1, NVIDIA H200, 143771\\n'\n");
  options_.fake_gpus = -1;
  // A proc GPU that must not be used when nvidia-smi answers.
  WriteProcGpu("0000:3b:00.0", "NVIDIA A100-SXM4-80GB", "Device Minor: \t 0\n");
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->gpus,
            (std::vector<GpuDevice>{{0, "NVIDIA H200", 143771}, {1, "NVIDIA H200", 143771}}));
  EXPECT_EQ(node->capacity().gpus, 2);
}

TEST_F(DetectLocalNodeTest, FailingNvidiaSmiFallsBackToProc) {
  options_.nvidia_smi = WriteScript("nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2\nexit 9\n");
  options_.fake_gpus = -1;
  WriteProcGpu("0000:3b:00.0", "NVIDIA A100-SXM4-80GB", "Device Minor: \t 0\n");
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_EQ(node->gpus, (std::vector<GpuDevice>{{0, "NVIDIA A100-SXM4-80GB", 0}}));
}

TEST_F(DetectLocalNodeTest, MissingNvidiaSmiFallsBackToProc) {
  options_.nvidia_smi = dir_ + "/no-such-nvidia-smi";
  options_.fake_gpus = -1;
  auto node = DetectLocalNode(options_);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  EXPECT_TRUE(node->gpus.empty());
}

TEST_F(DetectLocalNodeTest, MalformedNvidiaSmiOutputIsAnError) {
  options_.nvidia_smi = WriteScript("nvidia-smi", "echo 'No devices were found'\n");
  options_.fake_gpus = -1;
  ExpectErrorContains(DetectLocalNode(options_).status(), StatusCode::kInvalidArgument,
                      "nvidia-smi line 1");
}

}  // namespace
}  // namespace tarn::scheduler
