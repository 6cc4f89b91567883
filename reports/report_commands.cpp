#include "reports/report_commands.h"

#include <fstream>

#include "engine/core/cli_args.h"
#include "engine/core/error.h"
#include "reports/bundle_comparison.h"
#include "reports/bundle_view.h"
#include "reports/html_report.h"
#include "reports/markdown_report.h"
#include "reports/text_card.h"

namespace sparkglm::reports {

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::kIo, path.string() + ": cannot open for writing");
  out << text;
  out.close();
  if (!out) throw Error(ErrorKind::kIo, path.string() + ": write failed");
}

// True when `inner` is `outer` or lies below it, after resolving "..", links and relative paths.
bool is_within(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  const auto in = std::filesystem::weakly_canonical(std::filesystem::absolute(inner));
  const auto out = std::filesystem::weakly_canonical(std::filesystem::absolute(outer));
  auto i = in.begin();
  for (auto o = out.begin(); o != out.end(); ++o, ++i) {
    if (o->empty()) continue;  // the trailing "" of a path ending in '/'
    if (i == in.end() || *i != *o) return false;
  }
  return true;
}

int fail(std::ostream& err, const std::string& command, const Error& e, int code) {
  err << command << ": " << e.message() << '\n';
  return code;
}

receipts::VerifyOptions verify_options(const CliArgs& flags, receipts::VerdictCheck verdicts) {
  receipts::VerifyOptions options;
  options.trusted_keys = flags.str("--keys", receipts::kTrustedKeysFolder);
  options.gates = flags.str("--gates", "gates");
  options.verdicts = verdicts;
  return options;
}

// Writes why `bundle` does not verify to `err`; true when it verifies.
bool verifies(const std::filesystem::path& bundle, const receipts::VerifyOptions& options,
              const std::string& command, std::ostream& err) {
  const receipts::Problems problems = receipts::verify_bundle(bundle, options);
  if (problems.empty()) return true;
  err << command << ": refusing " << bundle.string()
      << ": it does not verify, so what it claims is not shown as fact (" << problems.size()
      << (problems.size() == 1 ? " problem)\n" : " problems)\n");
  for (const receipts::Problem& p : problems) err << "  " << p.to_string() << '\n';
  return false;
}

}  // namespace

RenderedReport render_all(const std::filesystem::path& bundle_dir) {
  const BundleView bundle = load_bundle(bundle_dir);
  return {render_text_card(bundle), render_markdown(bundle), render_html(bundle)};
}

int report_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                   receipts::VerdictCheck verdicts) {
  try {
    const CliArgs flags(args, {});
    flags.allow_only({"--out", "--format", "--keys", "--gates"});
    if (flags.positional().size() != 1)
      throw Error(ErrorKind::kInvalidArgument,
                  "expected one bundle folder: report BUNDLE [--out DIR] [--format card|md|html]");
    const std::filesystem::path bundle_dir = flags.positional()[0];
    const std::string format = flags.str("--format", "card");
    if (format != "card" && format != "md" && format != "html")
      throw Error(ErrorKind::kInvalidArgument,
                  "--format: expected card, md or html, got \"" + format + "\"");
    std::filesystem::path out_dir;
    if (flags.has("--out")) {
      out_dir = flags.str("--out", "");
      if (is_within(out_dir, bundle_dir))
        throw Error(ErrorKind::kInvalidArgument,
                    "--out: " + out_dir.string() + " lies inside the bundle " +
                        bundle_dir.string() +
                        "; a file added there would make the bundle fail verification, so "
                        "choose a folder outside it");
    }
    const RenderedReport report = render_all(bundle_dir);
    if (!verifies(bundle_dir, verify_options(flags, verdicts), "report", err)) return 1;
    if (!out_dir.empty()) {
      std::filesystem::create_directories(out_dir);
      write_file(out_dir / "card.txt", report.card);
      write_file(out_dir / "report.md", report.markdown);
      write_file(out_dir / "report.html", report.html);
    }
    out << (format == "md" ? report.markdown : format == "html" ? report.html : report.card);
    return 0;
  } catch (const Error& e) {
    return fail(err, "report", e, 2);
  } catch (const std::filesystem::filesystem_error& e) {
    err << "report: " << e.what() << '\n';
    return 2;
  }
}

int compare_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    receipts::VerdictCheck verdicts) {
  BundleView a, b;
  std::string out_file;
  double min_effect_pct = 5;
  bool verified = true;
  try {
    const CliArgs flags(args, {});
    flags.allow_only({"--out", "--min-effect", "--keys", "--gates"});
    if (flags.positional().size() != 2)
      throw Error(ErrorKind::kInvalidArgument,
                  "expected two bundle folders: compare A B [--out FILE.md] [--min-effect PCT]");
    min_effect_pct = static_cast<double>(flags.integer("--min-effect", 5, 0, 100));
    out_file = flags.str("--out", "");
    a = load_bundle(flags.positional()[0]);
    b = load_bundle(flags.positional()[1]);
    const receipts::VerifyOptions options = verify_options(flags, verdicts);
    for (const BundleView* bundle : {&a, &b})
      verified = verifies(bundle->dir, options, "compare", err) && verified;
  } catch (const Error& e) {
    return fail(err, "compare", e, 2);
  }
  std::string table;
  try {
    table = render_comparison(a, b, min_effect_pct);
  } catch (const Error& e) {
    return fail(err, "compare", e, 1);
  }
  if (!verified) return 1;
  try {
    if (!out_file.empty()) {
      for (const BundleView* bundle : {&a, &b})
        if (is_within(out_file, bundle->dir))
          throw Error(ErrorKind::kInvalidArgument,
                      "--out: " + out_file + " lies inside the bundle " + bundle->dir.string() +
                          "; choose a file outside it");
      write_file(out_file, table);
    }
  } catch (const Error& e) {
    return fail(err, "compare", e, 2);
  } catch (const std::filesystem::filesystem_error& e) {
    err << "compare: " << e.what() << '\n';
    return 2;
  }
  out << table;
  return 0;
}

}  // namespace sparkglm::reports
