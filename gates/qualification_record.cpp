// qualification.json of a qualification run, and the bundle's verification and card
// (qualification_record.h).
#include "gates/qualification_record.h"

#include "engine/core/utc_time.h"
#include "harness/run_environment.h"
#include "receipts/bundle_verifier.h"
#include "reports/report_commands.h"

namespace sparkglm::gates {

namespace {

using nlohmann::json;

std::string default_target(const RunRequest& r) {
  if (!r.baseline)
    return r.gate + " measurement of " +
           (gate_level(r.gate) < 2 ? "this build" : "the candidate server") +
           "; no claim of a change";
  if (r.option) return r.option->first + " = " + r.option->second + " passes " + r.gate;
  return "the candidate passes " + r.gate + " against the baseline";
}

}  // namespace

int finish_qualification(const RunRequest& req, QualificationRecord& rec,
                         receipts::BundleWriter& bundle, std::ostream& out, std::ostream& err) {
  const std::string id = req.out.filename().string();
  json gates = json::array();
  bool failed = false;
  for (const GateResult& r : rec.results) {
    gates.push_back(r.to_json());
    failed = failed || r.status == "fail";
  }
  json metric_json = json::array();
  for (const MetricSeries& m : rec.metrics) metric_json.push_back(metric_to_json(m, 5.0));
  json workloads_json = json::array();
  for (const std::string& w : rec.workload_ids)
    workloads_json.push_back(
        {{"id", w}, {"spec_sha256", rec.run.specs[w].sha256}, {"scale", req.scale}});
  json record = {{"schema", "sparkglm.qualification/1"},
                 {"id", id},
                 {"title", req.title.empty() ? req.gate + " qualification" : req.title},
                 {"created_at", utc_now_iso8601()},
                 {"state", req.state},
                 {"level", req.gate},
                 {"target", req.target.empty() ? default_target(req) : req.target},
                 {"change", rec.change},
                 {"environment", harness::probe_environment()},
                 {"workloads", workloads_json},
                 {"gates", gates},
                 {"metrics", metric_json},
                 {"limitations", rec.limitations},
                 {"client", rec.client},
                 {"counters", rec.counters},
                 {"sse_emit_delay", rec.emit_delays},
                 {"device_share", rec.device_share}};
  bundle.finish(record);
  const receipts::Problems problems = receipts::verify_bundle(req.out);
  for (const receipts::Problem& p : problems) err << "verify: " << p.to_string() << '\n';
  if (!problems.empty()) return 2;
  err << "bundle " << req.out.string() << " verifies\n";
  out << reports::render_all(req.out).card;
  return failed ? 1 : 0;
}

}  // namespace sparkglm::gates
