#include "daemon/config_doc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "base/file_util.h"
#include "daemon/config_parse.h"
#include "daemon/config_schema.h"
#include "testing/status_matchers.h"

namespace migd::daemon {
namespace {

using ::migd::testing::IsOk;
using ::migd::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ConfigDoc() {
  StatusOr<std::string> text = ReadFileToString(std::string(MIGD_SOURCE_DIR) + "/docs/config.md");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string DocWith(const std::string& table) {
  return "# title\n\nprose\n\n" + std::string(kKeyTableBegin) + "\n" + table +
         std::string(kKeyTableEnd) + "\n\nmore prose\n";
}

TEST(ConfigDocTest, OneRowPerValueKeyInSchemaOrder) {
  const std::string table = RenderKeyTable();
  EXPECT_THAT(table, StartsWith("| Key | Type | Default | Reload | Meaning |\n|---|"));
  size_t pos = 0;
  for (const KeySpec& key : ConfigSchema()) {
    const std::string row = "| `" + std::string(key.path) + "` |";
    const size_t at = table.find(row);
    if (key.type == KeyType::kSection) {
      EXPECT_EQ(at, std::string::npos) << key.path;
      continue;
    }
    ASSERT_NE(at, std::string::npos) << key.path;
    EXPECT_GT(at, pos) << key.path << " out of order";
    pos = at;
  }
}

TEST(ConfigDocTest, ColumnsComeFromTheRow) {
  const std::string table = RenderKeyTable();
  EXPECT_THAT(table, HasSubstr("| `lifecycle.reconcileInterval` | duration, `1s`..`1d` | `30s` | "
                               "restart | Period of the reconciler"));
  EXPECT_THAT(table, HasSubstr("| `lifecycle.idleTTL` | duration, `0` or `1s`..`30d` | `0` (off) "
                               "| **R** |"));
  EXPECT_THAT(table, HasSubstr("| `lifecycle.maxIdlePerGPU` | integer 0..64 | unset (no cap) |"));
  EXPECT_THAT(table, HasSubstr("| `api.socketMode` | octal string | `\"0600\"` | restart |"));
  EXPECT_THAT(table,
              HasSubstr("| `metrics.listen` | `host:port` or `\"\"` | `\"127.0.0.1:9400\"` |"));
  EXPECT_THAT(table, HasSubstr("| `log.level` | `trace`, `debug`, `info`, `warn`, `error`, "
                               "`critical`, `off` | `info` | **R** |"));
  EXPECT_THAT(table,
              HasSubstr("| `api.socketGroup` | group name or gid | `\"\"` (migd's group) |"));
}

TEST(ConfigDocTest, TheRepositoryDocHasTheRenderedTable) {
  EXPECT_THAT(CheckKeyTable(ConfigDoc(), "docs/config.md"), IsOk());
}

TEST(ConfigDocTest, AStaleTableIsCaughtWithTheLineAndTheFix) {
  std::string table = RenderKeyTable();
  const size_t at = table.find("`30s`");
  ASSERT_NE(at, std::string::npos);
  table.replace(at, 5, "`60s`");
  EXPECT_THAT(CheckKeyTable(DocWith(table), "x.md"),
              StatusIs(StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("x.md: the key table differs from the config schema"),
                             HasSubstr("document: | `lifecycle.reconcileInterval`"),
                             HasSubstr("`60s`"), HasSubstr("make config-doc"))));
  // A missing row and an extra row are caught too.
  std::string shorter = RenderKeyTable();
  shorter.erase(shorter.rfind("| `recovery.ownerSource`"));
  EXPECT_THAT(CheckKeyTable(DocWith(shorter), "x.md"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("document: (end)")));
  EXPECT_THAT(CheckKeyTable(DocWith(RenderKeyTable() + "| `extra` | | | | |\n"), "x.md"),
              StatusIs(StatusCode::kFailedPrecondition, HasSubstr("schema:   (end)")));
}

TEST(ConfigDocTest, MissingMarkersAreReported) {
  EXPECT_THAT(CheckKeyTable("# no table here\n", "x.md"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no key table between")));
  EXPECT_THAT(WithRenderedKeyTable(std::string(kKeyTableEnd) + "\n" + std::string(kKeyTableBegin)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no key table between")));
}

TEST(ConfigDocTest, RewritingReplacesOnlyTheTable) {
  MIGD_ASSERT_OK_AND_ASSIGN(std::string doc, WithRenderedKeyTable(DocWith("| stale |\n")));
  EXPECT_EQ(doc, DocWith(RenderKeyTable()));
  EXPECT_THAT(CheckKeyTable(doc, "x.md"), IsOk());
}

// The example in docs/config.md is a valid config.
TEST(ConfigDocTest, TheDocExampleParses) {
  const std::string doc = ConfigDoc();
  const size_t section = doc.find("## Example");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = doc.find("```yaml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t end = doc.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  EXPECT_THAT(
      ParseConfig(doc.substr(begin + 8, end - begin - 8), "docs/config.md example").status(),
      IsOk());
}

}  // namespace
}  // namespace migd::daemon
