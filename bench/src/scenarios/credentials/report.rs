//! C1's parent half: runs both modes and summarizes them into the report.

use serde_json::Value;

use super::sizes;
use crate::{child, report::Scenario};

/// Parent: C1 in place, then replace-on-rotation, each in its own child process (side by side
/// with `quick`).
pub fn run(quick: bool) -> Scenario {
    let s = sizes(quick);
    let mut sc = Scenario::new(
        "C1",
        format!(
            "{} shoots, {}-second client certificates, {} s of writes at {}/s: renewed in \
             place vs replaced on rotation",
            s.shoots,
            s.lifetime.as_secs(),
            s.run.as_secs(),
            s.rate
        ),
        "in place: every renewal in place, 0 relists, 0 requests refused for expired \
         credentials, every write reconciled",
    );
    let modes = ["in-place", "replace"];
    let one = |mode: &str| {
        let mut args = vec!["c1".to_string(), mode.to_string()];
        if quick {
            args.push("--quick".into());
        }
        child::run_one(&args).map_err(|err| format!("{mode}: {err:#}"))
    };
    // The smoke run (`--quick`) only checks that both modes run and renew, so it runs them side
    // by side (their figures are not compared); a measuring run keeps them apart.
    let results: Vec<Result<Value, String>> = if quick {
        std::thread::scope(|scope| {
            let handles: Vec<_> = modes
                .iter()
                .map(|&mode| scope.spawn(move || one(mode)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a run panicked".into())))
                .collect()
        })
    } else {
        let mut results = Vec::new();
        for mode in modes {
            let result = one(mode);
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        results
    };
    let mut runs = Vec::new();
    for result in results {
        match result {
            Ok(v) => runs.push(v),
            Err(err) => {
                sc.error = Some(err);
                return sc;
            }
        }
    }
    let (inp, rep) = (&runs[0], &runs[1]);
    let get = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let flag = |v: &Value, k: &str| v.get(k).and_then(Value::as_bool).map(f64::from);
    for (label, v) in [("in place", inp), ("replace", rep)] {
        sc.metric(&format!("{label}: renewals"), get(v, "renewals"), "");
        sc.metric(
            &format!("{label}: clusters still the same instance"),
            get(v, "clusters_kept"),
            &format!("of {}", s.shoots),
        );
        sc.metric(
            &format!("{label}: relists (list configmaps after the initial sync)"),
            get(v, "relists"),
            "",
        );
        sc.metric(
            &format!("{label}: requests refused 401 (server count)"),
            get(v, "refused_401_server"),
            "",
        );
        sc.metric(
            &format!("{label}: prober reads refused 401 / failed otherwise / cluster missing"),
            get(v, "probe_401"),
            &format!(
                "/ {} / {} (of {} reads)",
                get(v, "probe_other_errors").unwrap_or(f64::NAN),
                get(v, "probe_cluster_missing").unwrap_or(f64::NAN),
                get(v, "probe_reads").unwrap_or(f64::NAN)
            ),
        );
        sc.metric(
            &format!("{label}: failed reconciles (ClusterNotFound)"),
            get(v, "failed_reconciles"),
            "",
        );
        sc.metric(&format!("{label}: writes"), get(v, "writes"), "");
        sc.metric(&format!("{label}: reconciles"), get(v, "reconciles"), "");
        sc.metric(
            &format!("{label}: every write reconciled (1 = yes)"),
            flag(v, "all_reconciled"),
            "",
        );
        sc.metric(
            &format!("{label}: last write to all reconciled"),
            get(v, "drain_s"),
            "s",
        );
    }
    sc.metric(
        "replace: time to consistency after a renewal, median",
        get(rep, "gap_median_ms"),
        "ms",
    );
    sc.metric(
        "replace: time to consistency after a renewal, p99",
        get(rep, "gap_p99_ms"),
        "ms",
    );
    sc.metric(
        "replace: time to consistency after a renewal, max",
        get(rep, "gap_max_ms"),
        "ms",
    );
    let lists = |v: &Value| Some(get(v, "lists_initial")? + get(v, "relists")?);
    sc.metric(
        "list requests over the whole run, replace / in place",
        lists(rep).zip(lists(inp)).map(|(r, i)| r / i.max(1.0)),
        "x",
    );
    sc.metric(
        "relists per renewal, replace / in place",
        get(rep, "relists")
            .zip(get(rep, "renewals"))
            .map(|(l, r)| l / r.max(1.0)),
        &format!(
            "/ {}",
            get(inp, "relists")
                .zip(get(inp, "renewals"))
                .map(|(l, r)| l / r.max(1.0))
                .unwrap_or(f64::NAN)
        ),
    );
    let zero = |k: &str| get(inp, k) == Some(0.0);
    sc.goal_met = Some(
        get(inp, "renewals").is_some_and(|r| r > 0.0)
            && get(inp, "clusters_kept") == Some(s.shoots as f64)
            && zero("relists")
            && zero("refused_401_server")
            && zero("probe_401")
            && zero("failed_reconciles")
            && flag(inp, "all_reconciled") == Some(1.0),
    );
    sc.runs = runs;
    sc
}
