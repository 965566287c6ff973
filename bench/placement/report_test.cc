// The report of the placement benchmark: the template filler and the
// template itself (every placeholder it uses has a value; every section is
// one the report knows).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "bench/placement/report_tables.h"
#include "bench/placement/report_util.h"
#include "bench/placement/template_fill.h"

namespace migd::bench {
namespace {

using ::testing::HasSubstr;

TEST(TemplateFillTest, ReplacesPlaceholdersAndKeepsEnabledSections) {
  const std::string text =
      "# {{title}}\n{{#extra}}\nmore {{x}}\n{{/extra}}\n{{#off}}\nhidden {{y}}\n{{/off}}\nend\n";
  StatusOr<std::string> out = FillTemplate(text, {{"title", "T"}, {"x", "1"}}, {"extra"});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "# T\nmore 1\nend\n");
}

TEST(TemplateFillTest, ErrorsNameTheLine) {
  EXPECT_THAT(FillTemplate("a\n{{missing}}\n", {}, {}).status().message(),
              HasSubstr("template line 2: no value for {{missing}}"));
  EXPECT_THAT(FillTemplate("{{open\n", {}, {}).status().message(),
              HasSubstr("template line 1: unclosed {{"));
  EXPECT_THAT(FillTemplate("{{/s}}\n", {}, {}).status().message(),
              HasSubstr("template line 1: {{/s}} not open"));
  EXPECT_THAT(FillTemplate("{{#a}}\n{{#b}}\n", {}, {}).status().message(),
              HasSubstr("template line 2: blocks do not nest"));
  EXPECT_THAT(FillTemplate("{{#a}}\nx\n", {}, {}).status().message(),
              HasSubstr("block {{#a}} not closed"));
}

// The committed template fills with every value the report provides and
// every section enabled; a placeholder the report does not provide fails.
TEST(TemplateFillTest, TheReportTemplateIsComplete) {
  std::ifstream in(std::string(MIGD_SOURCE_DIR) + "/bench/placement/report_template.md");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(in) << "cannot read report_template.md";
  std::map<std::string, std::string> values;
  for (const char* key : {"meta_table",         "goal_scope",
                          "goal_table",         "deficit_list",
                          "idle_table",         "large_profile_table",
                          "headline_tables",    "b11_states",
                          "b11_table",          "value_vs_order_table",
                          "solve_table",        "plots",
                          "half_life",          "seed_sentence",
                          "trace_files",        "full_tables",
                          "per_profile_tables", "fragmentation_tables",
                          "ops_tables",         "latency_repeats",
                          "latency_tables",     "queue_tables",
                          "lognormal_table",    "h200_table",
                          "script_table",       "commands",
                          "plots_dir"}) {
    values[key] = std::string("<") + key + ">";
  }
  const std::set<std::string> sections = {"synth",     "diag", "latency", "queue",
                                          "lognormal", "h200", "scripts"};
  StatusOr<std::string> out = FillTemplate(text.str(), values, sections);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_THAT(*out, HasSubstr("<goal_table>"));
  EXPECT_THAT(*out, ::testing::Not(HasSubstr("{{")));
  values.erase("goal_table");
  EXPECT_FALSE(FillTemplate(text.str(), values, sections).ok());
}

TEST(ReportUtilTest, Formatting) {
  EXPECT_EQ(report::Fix(-0.0001, 2), "0.00");
  EXPECT_EQ(report::Fix(0.5, 1, true), "+0.5");
  EXPECT_EQ(report::Pct(0.12345), "12.35");
  EXPECT_EQ(report::Pp(-0.0012, 0.003), "-0.12 ± 0.30");
  EXPECT_EQ(report::PrettyWorkload("trace:openb_pod_list_default.csv:compute-ceil"),
            "Alibaba default (compute-ceil)");
  EXPECT_EQ(report::Slug("a b/c"), "a-b-c");
}

TEST(ReportTablesTest, HeadlineTableFromACell) {
  const report::Json doc = report::Json::parse(R"({"cells": [{
    "workload": "uniform", "load": 0.9, "gpus": 8,
    "best": {"acc": "B1", "slice": "B1"},
    "paired": {"migd-B1": {"acc": {"mean": 0.01, "ci": 0.002},
                           "slice": {"mean": -0.02, "ci": 0.001}}},
    "policies": {"migd": {"acc": {"mean": 0.9}, "slice": {"mean": 0.8}},
                 "B1": {"acc": {"mean": 0.89}, "slice": {"mean": 0.82}}}}]})");
  const std::string table = report::HeadlineTable(doc, 8);
  // No migd-order or migd-slice in the cell: its column is empty and the
  // slice columns fall back to migd.
  EXPECT_THAT(table, HasSubstr("| uniform | 0.9 | 90.00 | B1 89.00 | +1.00 ± 0.20 |  | 80.00 | "
                               "B1 82.00 | -2.00 ± 0.10 |  |  |"));
}

}  // namespace
}  // namespace migd::bench
