#include "gates/qualify_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <filesystem>

#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "engine/core/shell_words.h"
#include "gates/engine_measurement.h"
#include "gates/gate_definition.h"
#include "gates/promotion.h"
#include "gates/qualification_run.h"
#include "gates/speculation_bundle.h"
#include "gates/verdict_rederivation.h"
#include "receipts/bundle_verifier.h"
#include "reports/report_commands.h"

namespace sparkglm::gates {
namespace {

namespace fs = std::filesystem;

fs::path self_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

std::string default_id(const std::string& gate, const std::string& preset,
                       const std::string& device) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d-%H%M%S", &tm);
  std::string id = std::string(stamp) + "-" + gate + "-" + preset + "-" + device;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return std::tolower(c); });
  return id;
}

const char* const kRunUsage =
    "usage: sparkglm-qualify run [--gate G0..G5] [--scale S] [--preset P | --checkpoint DIR]\n"
    "         [--device cpu|cuda]\n"
    "         [--server-args \"FLAGS\"] [--candidate-args \"FLAGS\"] [--option NAME=VALUE]\n"
    "         [--ab] [--baseline-args \"FLAGS\"] [--baseline-bin PATH] [--server-bin PATH]\n"
    "         [--id ID] [--out DIR] [--title T] [--target T] [--state S] [--change-class C]\n"
    "         [--repetitions N] [--ctest-dir DIR] [--operators FILE] [--operator-runner PATH]\n"
    "         [--workload ID,ID...] [--workloads DIR] [--gates DIR] [--receipts DIR]\n"
    "         [--profiles DIR]\n"
    "   or: sparkglm-qualify run --url URL [--api-key-env NAME] [--model ID] [--gate G2..G4]\n"
    "         [--scale S] [--repetitions N] [--workload ID,...] [--id ID] [--out DIR] ...\n"
    "         measures a server that is already running (started by `sparkglm start`, a peer\n"
    "         engine, a remote appliance); nothing is started or stopped, and the bundle says its\n"
    "         binary and profile were not observed (no promotion can cite it)\n";

// The flags that start or configure a server: meaningless when --url measures a running one.
const char* const kProcessFlags[] = {
    "--preset", "--checkpoint", "--device",        "--server-args",  "--candidate-args",
    "--option", "--ab",         "--baseline-args", "--baseline-bin", "--server-bin"};

}  // namespace

int run_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    const CliArgs a(args, {"--ab", "--help"});
    if (a.has("--help")) {
      out << kRunUsage;
      return 0;
    }
    a.allow_only({"--gate",
                  "--workload",
                  "--scale",
                  "--preset",
                  "--checkpoint",
                  "--device",
                  "--server-args",
                  "--candidate-args",
                  "--option",
                  "--ab",
                  "--baseline-args",
                  "--baseline-bin",
                  "--server-bin",
                  "--id",
                  "--out",
                  "--title",
                  "--target",
                  "--state",
                  "--change-class",
                  "--repetitions",
                  "--ctest-dir",
                  "--operators",
                  "--operator-runner",
                  "--workloads",
                  "--gates",
                  "--receipts",
                  "--profiles",
                  "--url",
                  "--api-key-env",
                  "--model",
                  "--help"});
    if (!a.has("--url"))
      for (const char* f : {"--api-key-env", "--model"})
        if (a.has(f))
          throw Error(ErrorKind::kInvalidArgument,
                      std::string(f) + ": only with --url (a started server serves its preset)");
    if (!a.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument \"" + a.positional()[0] + "\"");
    RunRequest r;
    r.gate = a.str("--gate", "G2");
    if (!is_gate_id(r.gate))
      throw Error(ErrorKind::kInvalidArgument,
                  "--gate: expected one of G0..G5, got \"" + r.gate + "\"");
    const std::string scale = a.str("--scale", "1");
    try {
      size_t used = 0;
      r.scale = std::stod(scale, &used);
      if (used != scale.size() || !(r.scale > 0 && r.scale <= 1)) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--scale: expected a number in (0, 1], got \"" + scale + "\"");
    }
    if (a.has("--url")) {
      for (const char* f : kProcessFlags)
        if (a.has(f))
          throw Error(ErrorKind::kInvalidArgument,
                      std::string(f) +
                          ": --url measures a server that is already running, so nothing is "
                          "started or configured; leave it out");
      r.external =
          ExternalServer{a.str("--url", ""), a.str("--api-key-env", ""), a.str("--model", "")};
    }
    if (a.has("--checkpoint") && a.has("--preset"))
      throw Error(ErrorKind::kInvalidArgument,
                  "--checkpoint and --preset are alternatives: the server serves one model");
    // A checkpoint directory (a trained tinyGLM, a converted model) is served with --model; the
    // server reports its config and weights identity, which the bundle records.
    const std::string checkpoint = a.str("--checkpoint", "");
    const std::string preset = checkpoint.empty()
                                   ? a.str("--preset", r.external ? "url" : "tinyglm")
                                   : fs::path(checkpoint).lexically_normal().filename().string();
    const std::string device = a.str("--device", r.external ? "endpoint" : "cpu");
    if (r.external && gate_level(r.gate) < 2)
      throw Error(ErrorKind::kInvalidArgument,
                  "--gate " + r.gate + ": --url measures a server, so G2 or above");
    if (!r.external && device != "cpu" && device != "cuda")
      throw Error(ErrorKind::kInvalidArgument,
                  "--device: expected cpu or cuda, got \"" + device + "\"");
    const fs::path bin_dir = self_dir();
    std::vector<std::string> shared = {checkpoint.empty() ? "--preset" : "--model",
                                       checkpoint.empty() ? preset : checkpoint, "--device",
                                       device};
    const auto extra = split_shell_words(a.str("--server-args", ""), "--server-args");
    shared.insert(shared.end(), extra.begin(), extra.end());

    r.candidate.binary = a.str("--server-bin", (bin_dir / "sparkglm-serve").string());
    r.candidate.args = shared;
    const auto cand = split_shell_words(a.str("--candidate-args", ""), "--candidate-args");
    r.candidate.args.insert(r.candidate.args.end(), cand.begin(), cand.end());
    if (a.has("--option")) {
      const std::string o = a.str("--option", "");
      const size_t eq = o.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == o.size())
        throw Error(ErrorKind::kInvalidArgument,
                    "--option: expected NAME=VALUE, got \"" + o + "\"");
      r.option = std::make_pair(o.substr(0, eq), o.substr(eq + 1));
      r.candidate.args.push_back("--" + o);  // the candidate runs with the option under test
    }
    if (a.has("--ab") || a.has("--baseline-args") || a.has("--baseline-bin")) {
      ArmCommand base;
      base.binary = a.str("--baseline-bin", r.candidate.binary);
      base.args = shared;
      const auto b = split_shell_words(a.str("--baseline-args", ""), "--baseline-args");
      base.args.insert(base.args.end(), b.begin(), b.end());
      r.baseline = base;
    }
    r.id = a.str("--id", default_id(r.gate, preset, device));
    r.out = a.str("--out", (fs::path("out") / "qualify" / r.id).string());
    if (fs::path(r.out).filename() != r.id && a.has("--id"))
      throw Error(ErrorKind::kInvalidArgument,
                  "--out: the bundle folder's name must be the id " + r.id);
    r.title =
        a.str("--title", r.external ? r.gate + " measurement of the server at " + r.external->url
                         : gate_level(r.gate) < 2
                             ? r.gate + " qualification of this build"
                             : r.gate + " tinyGLM qualification (" + preset + ", " + device + ")");
    r.target = a.str("--target", "");
    r.state = a.str("--state", "measurement");
    r.change_class = a.str("--change-class", r.option ? "" : "launcher-profile");
    r.repetitions = int32_t(a.integer("--repetitions", 0, 0, 1000));
    r.ctest_dir = a.str("--ctest-dir", "");
    r.operators_json = a.str("--operators", "");
    r.operator_runner =
        a.str("--operator-runner", (bin_dir / "bench" / "cuda" / "g1_operators").string());
    r.workloads = a.str("--workloads", "workloads");
    for (const std::string& w : split_shell_words(a.str("--workload", ""), "--workload")) {
      std::string rest = w;
      for (size_t at; (at = rest.find(',')) != std::string::npos; rest = rest.substr(at + 1))
        if (at > 0) r.extra_workloads.push_back(rest.substr(0, at));
      if (!rest.empty()) r.extra_workloads.push_back(rest);
    }
    for (const std::string& w : r.extra_workloads)
      if (!std::filesystem::exists(r.workloads / (w + ".json")))
        throw Error(ErrorKind::kInvalidArgument,
                    "--workload: no workload \"" + w + "\" in " + r.workloads.string());
    r.gates = a.str("--gates", "gates");
    r.receipts = a.str("--receipts", "receipts");
    r.profiles = a.str("--profiles", "profiles");
    if (r.change_class.empty()) {  // the option's own class
      r.change_class = ChangeClassPolicy::load(r.gates.string()).for_option(r.option->first).name;
    }
    return run_qualification(r, out, err);
  } catch (const Error& e) {
    err << "sparkglm-qualify run: " << e.what() << '\n';
    return 2;
  } catch (const std::exception& e) {
    err << "sparkglm-qualify run: " << e.what() << '\n';
    return 2;
  }
}

int measure_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    // --runner-bench, --speculation-bench and --limitation may repeat; CliArgs keeps one value
    // per flag, so those are gathered here.
    MeasureRequest r;
    std::vector<fs::path> speculation;
    std::vector<std::string> rest;
    for (size_t i = 0; i < args.size(); ++i)
      if (args[i] == "--runner-bench" && i + 1 < args.size())
        r.runner_bench.push_back(args[++i]);
      else if (args[i] == "--speculation-bench" && i + 1 < args.size())
        speculation.push_back(args[++i]);
      else if (args[i] == "--limitation" && i + 1 < args.size())
        r.notes.push_back(args[++i]);
      else
        rest.push_back(args[i]);
    const CliArgs a(rest, {});
    a.allow_only({"--torch-peer", "--title", "--id", "--out", "--gates"});
    if (!a.positional().empty())
      throw Error(ErrorKind::kInvalidArgument, "unexpected argument \"" + a.positional()[0] + "\"");
    // One bundle judges one kind of bench under one set of targets.
    if (!speculation.empty() && !r.runner_bench.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  "--speculation-bench and --runner-bench: one kind of bench file per bundle");
    if (!speculation.empty() && a.has("--torch-peer"))
      throw Error(ErrorKind::kInvalidArgument,
                  "--torch-peer: only with --runner-bench (a speculation bundle has no peer)");
    r.torch_peer = a.str("--torch-peer", "");
    r.gates = a.str("--gates", "gates");
    r.title = a.required("--title");
    r.id = a.required("--id");
    r.out = a.str("--out", (fs::path("out") / "qualify" / r.id).string());
    if (r.out.filename() != r.id)
      throw Error(ErrorKind::kInvalidArgument,
                  "--out: the bundle folder's name must be the id " + r.id);
    if (!speculation.empty()) {
      const nlohmann::json record =
          write_speculation_bundle(r.out, {speculation, r.title, r.id, r.notes, r.gates});
      // In full: the verdict is judged again from the carried files, as `verify` does.
      const receipts::Problems problems =
          receipts::verify_bundle(r.out, full_verification(receipts::kTrustedKeysFolder, r.gates));
      for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << '\n';
      if (!problems.empty()) return 2;
      err << "bundle " << r.out.string() << " verifies\n";
      out << reports::render_all(r.out).card;
      return record["gates"][0]["status"] == "fail" ? 1 : 0;
    }
    const nlohmann::json record = write_engine_measurement(r);
    const receipts::Problems problems = receipts::verify_bundle(r.out);
    for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << '\n';
    if (!problems.empty()) return 2;
    err << "bundle " << r.out.string() << " verifies\n";
    out << reports::render_all(r.out).card;
    return record["gates"][0]["status"] == "fail" ? 1 : 0;
  } catch (const std::exception& e) {
    err << "sparkglm-qualify measure: " << e.what() << '\n';
    return 2;
  }
}

int promote_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    const CliArgs a(args, {});
    a.allow_only({"--profile", "--option", "--value", "--receipt", "--profile-dir", "--receipts",
                  "--gates"});
    PromoteRequest r;
    r.profile = a.required("--profile");
    r.option = a.required("--option");
    r.value = a.required("--value");
    r.receipt = a.required("--receipt");
    r.profile_dir = a.str("--profile-dir", "profiles");
    r.receipts = a.str("--receipts", "receipts");
    r.gates = a.str("--gates", "gates");
    promote(r);
    out << "promoted " << r.option << " = " << r.value << " in profile " << r.profile
        << " with receipt " << r.receipt.filename().string() << '\n';
    return 0;
  } catch (const Error& e) {
    err << "sparkglm-qualify promote: " << e.what() << '\n';
    return e.kind() == ErrorKind::kInvalidArgument ? 1 : 2;
  }
}

}  // namespace sparkglm::gates
