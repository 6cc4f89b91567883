#include "workloads/workload_spec.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "engine/core/error.h"
#include "engine/core/sha256.h"
#include "tests/support/build_paths.h"

namespace sparkglm::workloads {
namespace {

using nlohmann::json;

const std::string kDir = sparkglm::testing::source_dir() + "/workloads";

std::vector<WorkloadSpec> all_specs() {
  std::vector<WorkloadSpec> specs;
  for (const std::string& path : workload_files(kDir)) specs.push_back(load_workload(path));
  return specs;
}

TEST(WorkloadSpec, EveryCommittedSpecParsesAndValidates) {
  const std::vector<std::string> files = workload_files(kDir);
  const std::set<std::string> expected = {
      "cold-prefill",        "decode-by-class", "determinism",        "matrix",
      "multi-turn",          "quality-probes",  "staggered-arrivals", "tinyglm-gate",
      "tinyglm-prefill-gate"};
  std::set<std::string> ids;
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    WorkloadSpec w;
    ASSERT_NO_THROW(w = load_workload(path));
    EXPECT_EQ(w.sha256.size(), 64u);
    EXPECT_FALSE(w.cases.empty());
    ids.insert(w.id);
  }
  EXPECT_EQ(ids, expected);
}

// A workload claiming 8 GiB (sparse: no disk) is refused by its size before it is read whole.
TEST(WorkloadSpec, HugeWorkloadFileIsRefusedBeforeItIsRead) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("sparkglm_workload_huge_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << "{}";
  std::filesystem::resize_file(path, uintmax_t(8) << 30);
  try {
    load_workload(path.string());
    ADD_FAILURE() << "an 8 GiB workload was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidConfig);
    EXPECT_EQ(e.message(), path.string() +
                               ": 8589934592 bytes, larger than the limit of "
                               "67108864 bytes for this JSON file");
  }
  std::filesystem::remove(path);
}

TEST(WorkloadSpec, ShaIsTheFileBytes) {
  const std::string path = kDir + "/tinyglm-gate.json";
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(load_workload(path).sha256, sha256_hex(bytes));
}

// A salt names one set of prompts: shared only inside a workload by cases that send the same ones.
TEST(WorkloadSpec, SaltsAreUniqueAcrossWorkloads) {
  std::map<std::string, std::string> owner;
  for (const WorkloadSpec& w : all_specs())
    for (const CaseSpec& c : w.cases) {
      auto [it, inserted] = owner.emplace(c.salt, w.id);
      EXPECT_TRUE(inserted || it->second == w.id)
          << "salt " << c.salt << " in " << w.id << " and " << it->second;
    }
}

TEST(WorkloadSpec, GateWorkloadsMatchQualification) {
  const WorkloadSpec g = load_workload(kDir + "/tinyglm-gate.json");
  ASSERT_TRUE(g.gate);
  const CaseSpec* d = g.find_case("decode_c1");
  const CaseSpec* m = g.find_case("mixed_c4");
  const CaseSpec* l = g.find_case("long_c2");
  ASSERT_TRUE(d && m && l);
  EXPECT_EQ(d->prompt.tokens_for(0), 128);
  EXPECT_EQ(d->max_tokens, 256);
  EXPECT_EQ(m->prompt.tokens_for(0), 4096);
  EXPECT_EQ(m->max_tokens, 128);
  EXPECT_EQ(m->requests, 4);
  EXPECT_EQ(m->arrival.stagger_s, 0.25);
  EXPECT_EQ(l->prompt.tokens_for(0), 16384);
  EXPECT_EQ(l->max_tokens, 32);
  EXPECT_EQ(l->requests, 2);
  EXPECT_EQ(l->arrival.stagger_s, 0.5);
  for (const CaseSpec& c : g.cases) {
    EXPECT_GE(c.repetitions, 3);
    EXPECT_TRUE(c.ignore_eos && c.return_token_ids);
  }
  const WorkloadSpec p = load_workload(kDir + "/tinyglm-prefill-gate.json");
  std::set<uint64_t> seeds;
  for (const CaseSpec& c : g.cases) seeds.insert(c.prompt.seed);
  for (const CaseSpec& c : p.cases) {
    EXPECT_EQ(c.max_tokens, 1);
    EXPECT_TRUE(seeds.insert(c.prompt.seed).second)
        << "prefill seed " << c.prompt.seed << " reused";
  }
}

TEST(WorkloadSpec, ScaleShrinksWithFloors) {
  const WorkloadSpec g = load_workload(kDir + "/tinyglm-gate.json");
  const WorkloadSpec s = scaled(g, 0.05);
  EXPECT_EQ(s.scale, 0.05);
  EXPECT_EQ(s.sha256, g.sha256);
  const CaseSpec& d = *s.find_case("decode_c1");
  EXPECT_EQ(d.prompt.tokens_for(0), 96);  // round(6.4) is under min_tokens 96
  EXPECT_EQ(d.max_tokens, 13);            // round(12.8)
  EXPECT_EQ(d.repetitions, 3);            // a gate keeps three
  EXPECT_EQ(d.warmups, 1);
  const CaseSpec& l = *s.find_case("long_c2");
  EXPECT_EQ(l.prompt.tokens_for(0), 819);  // round(819.2)
  EXPECT_EQ(l.max_tokens, 8);              // round(1.6) is under the floor of 8
  EXPECT_EQ(l.arrival.stagger_s, 0.5);     // arrivals are unchanged
  EXPECT_EQ(l.requests, 2);

  const WorkloadSpec p = scaled(load_workload(kDir + "/tinyglm-prefill-gate.json"), 0.05);
  EXPECT_EQ(p.cases[0].max_tokens, 1);  // the floor never raises a value

  const WorkloadSpec m = scaled(load_workload(kDir + "/matrix.json"), 0.05);
  EXPECT_EQ(m.cases[0].repetitions, 1);
  const WorkloadSpec det = scaled(load_workload(kDir + "/determinism.json"), 0.05);
  EXPECT_EQ(det.cases[0].repetitions, 2);  // min_repetitions: "twice"
}

TEST(WorkloadSpec, ScaleNeverGrowsAnything) {
  for (const WorkloadSpec& w : all_specs()) {
    for (double scale : {1.0, 0.5, 0.1, 0.01}) {
      const WorkloadSpec s = scaled(w, scale);
      for (size_t i = 0; i < w.cases.size(); ++i) {
        const CaseSpec& a = w.cases[i];
        const CaseSpec& b = s.cases[i];
        SCOPED_TRACE(w.id + "/" + a.id + " at " + std::to_string(scale));
        for (size_t k = 0; k < a.prompt.tokens.size(); ++k) {
          EXPECT_LE(b.prompt.tokens[k], a.prompt.tokens[k]);
          EXPECT_GE(b.prompt.tokens[k], a.prompt.min_tokens);
          if (scale == 1.0) {
            EXPECT_EQ(b.prompt.tokens[k], a.prompt.tokens[k]);
          }
        }
        EXPECT_LE(b.max_tokens, a.max_tokens);
        EXPECT_GE(b.max_tokens, std::min(8, a.max_tokens));
        EXPECT_LE(b.repetitions, a.repetitions);
        EXPECT_GE(b.repetitions, w.gate ? 3 : a.min_repetitions);
        EXPECT_GE(b.warmups, std::min(1, a.warmups));
        EXPECT_EQ(b.requests, a.requests);
      }
    }
  }
  const WorkloadSpec g = all_specs().front();
  EXPECT_THROW(scaled(g, 0), Error);
  EXPECT_THROW(scaled(g, 1.5), Error);
}

json minimal_spec() {
  return json::parse(R"({
    "schema": "sparkglm.workload/1", "id": "t", "title": "t",
    "cases": [{"id": "a", "title": "a", "endpoint": "completions",
               "prompt": {"builder": "prose", "seed": 1, "tokens": 64},
               "max_tokens": 8, "arrival": {"type": "closed", "concurrency": 1},
               "requests": 2, "repetitions": 3, "salt": "s-a", "graders": ["exact_length"]}]
  })");
}

struct BadSpec {
  std::string name;
  std::function<void(json&)> edit;
  std::string field;  // the message must name it
};

TEST(WorkloadSpec, BadSpecsAreRejectedNamingTheField) {
  const std::vector<BadSpec> cases = {
      {"schema", [](json& j) { j["schema"] = "v0"; }, "schema"},
      {"id pattern", [](json& j) { j["id"] = "Bad Id"; }, "id"},
      {"no cases", [](json& j) { j["cases"] = json::array(); }, "cases"},
      {"unknown top key", [](json& j) { j["case"] = 1; }, "case"},
      {"case id", [](json& j) { j["cases"][0]["id"] = "A B"; }, "cases[0].id"},
      {"endpoint", [](json& j) { j["cases"][0]["endpoint"] = "grpc"; }, "cases[0].endpoint"},
      {"builder", [](json& j) { j["cases"][0]["prompt"]["builder"] = "poem"; },
       "cases[0].prompt.builder"},
      {"seed", [](json& j) { j["cases"][0]["prompt"]["seed"] = -1; }, "cases[0].prompt.seed"},
      {"tokens length",
       [](json& j) {
         j["cases"][0]["prompt"]["tokens"] = {64, 64, 64};
       },
       "cases[0].prompt.tokens"},
      {"tokens floor", [](json& j) { j["cases"][0]["prompt"]["tokens"] = 8; },
       "cases[0].prompt.tokens"},
      {"tokens entry",
       [](json& j) {
         j["cases"][0]["prompt"]["tokens"] = {64, "x"};
       },
       "cases[0].prompt.tokens[1]"},
      {"max_tokens", [](json& j) { j["cases"][0]["max_tokens"] = 0; }, "cases[0].max_tokens"},
      {"typo", [](json& j) { j["cases"][0]["max_token"] = 8; }, "cases[0].max_token"},
      {"arrival",
       [](json& j) {
         j["cases"][0]["arrival"] = {{"type", "burst"}};
       },
       "cases[0].arrival"},
      {"repetitions", [](json& j) { j["cases"][0]["repetitions"] = 0; }, "cases[0].repetitions"},
      {"gate repetitions",
       [](json& j) {
         j["gate"] = true;
         j["cases"][0]["repetitions"] = 2;
       },
       "cases[0].repetitions"},
      {"salt", [](json& j) { j["cases"][0]["salt"] = "S_A"; }, "cases[0].salt"},
      {"duplicate id", [](json& j) { j["cases"].push_back(j["cases"][0]); }, "cases[1].id"},
      {"shared salt, other prompts",
       [](json& j) {
         json c = j["cases"][0];
         c["id"] = "b";
         c["prompt"]["seed"] = 2;
         j["cases"].push_back(c);
       },
       "cases[1].salt"},
      {"grader name", [](json& j) { j["cases"][0]["graders"] = {"vibes"}; }, "cases[0].graders[0]"},
      {"exact_length without ignore_eos", [](json& j) { j["cases"][0]["ignore_eos"] = false; },
       "cases[0].graders[0]"},
      {"grader for another builder", [](json& j) { j["cases"][0]["graders"] = {"arithmetic"}; },
       "cases[0].graders[0]"},
      {"grader param",
       [](json& j) {
         j["cases"][0]["graders"] = {{{"name", "isolation"}, {"strict", true}}};
       },
       "cases[0].graders[0].strict"},
      {"determinism reference",
       [](json& j) {
         j["cases"][0]["graders"] = {{{"name", "determinism"}, {"reference_case", "zz"}}};
       },
       "reference_case"},
      {"sampling key",
       [](json& j) {
         j["cases"][0]["sampling"] = {{"temp", 0}};
       },
       "cases[0].sampling.temp"},
      {"template kwargs on completions",
       [](json& j) {
         j["cases"][0]["chat_template_kwargs"] = {{"enable_thinking", false}};
       },
       "cases[0].chat_template_kwargs"},
      {"warm replay odd",
       [](json& j) {
         j["cases"][0]["warm_replay"] = true;
         j["cases"][0]["requests"] = 3;
       },
       "cases[0].requests"},
      {"conversation on completions",
       [](json& j) {
         j["cases"][0]["prompt"]["builder"] = "conversation";
         j["cases"][0]["prompt"]["tokens"] = {64, 128};
       },
       "cases[0].endpoint"},
      {"conversation shrinking",
       [](json& j) {
         j["cases"][0]["endpoint"] = "chat";
         j["cases"][0]["prompt"]["builder"] = "conversation";
         j["cases"][0]["prompt"]["tokens"] = {64, 32};
       },
       "cases[0].prompt.tokens[1]"},
      {"tool calls on completions",
       [](json& j) {
         j["cases"][0]["prompt"]["builder"] = "tool_call";
         j["cases"][0]["graders"] = {"tool_call"};
       },
       "cases[0].endpoint"},
      {"constrained elsewhere", [](json& j) { j["cases"][0]["prompt"]["constrained"] = true; },
       "cases[0].prompt.constrained"},
      {"depth elsewhere", [](json& j) { j["cases"][0]["prompt"]["depth"] = 0.5; },
       "cases[0].prompt.depth"},
      {"depth out of range",
       [](json& j) {
         j["cases"][0]["prompt"]["builder"] = "needle";
         j["cases"][0]["graders"] = {"needle"};
         j["cases"][0]["ignore_eos"] = false;
         j["cases"][0]["prompt"]["depth"] = 1.5;
       },
       "cases[0].prompt.depth"},
      {"json_schema grader for another builder",
       [](json& j) { j["cases"][0]["graders"] = {"json_schema"}; }, "cases[0].graders[0]"},
      {"sessions elsewhere",
       [](json& j) {
         j["cases"][0]["prompt"]["sessions"] = {0, 1};
       },
       "cases[0].prompt.sessions"},
  };
  ASSERT_NO_THROW(parse_workload(minimal_spec(), "ok.json"));
  for (const BadSpec& c : cases) {
    SCOPED_TRACE(c.name);
    json j = minimal_spec();
    c.edit(j);
    try {
      parse_workload(j, "bad.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string m = e.message();
      EXPECT_EQ(m.rfind("bad.json: ", 0), 0u) << m;
      EXPECT_NE(m.find(c.field), std::string::npos)
          << "message does not name " << c.field << ": " << m;
    }
  }
}

TEST(WorkloadSpec, LoadChecksTheFileName) {
  const std::filesystem::path dir =
      std::filesystem::path(sparkglm::testing::binary_dir()) / "workloads-test-tmp";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "other-name.json").string();
  std::ofstream(path) << minimal_spec().dump();
  try {
    load_workload(path);
    ADD_FAILURE() << "accepted an id that is not the file's stem";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("id"), std::string::npos) << e.message();
  }
  std::ofstream(path) << "{not json";
  EXPECT_THROW(load_workload(path), Error);
  EXPECT_THROW(load_workload((dir / "missing.json").string()), Error);
}

}  // namespace
}  // namespace sparkglm::workloads
