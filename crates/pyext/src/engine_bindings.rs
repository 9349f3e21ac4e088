//! Binding of the load engine: `spec_validate`, `run_load`, `merge_results`, `error_classes`
//! and the histogram helpers.
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pywebbench_engine::{hist, LoadSpec, StartError};
use std::time::{Duration, Instant};

/// How long the waiting thread sleeps between checks for Ctrl-C and progress.
const TICK: Duration = Duration::from_millis(50);
/// Longest wait for the threads after a stop request.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// Parse and validate a load spec (JSON) with the engine's own rules, without running it
/// (the host is not resolved). Returns the spec with every default filled in (JSON); raises
/// ValueError with one line naming the field, e.g. `"connections: must be >= 1"`.
#[pyfunction]
fn spec_validate(spec_json: &str) -> PyResult<String> {
    pywebbench_engine::normalise_spec_json(spec_json).map_err(PyValueError::new_err)
}

/// Run a load spec (JSON) and return the result (JSON).
///
/// The engine runs on its own threads; this thread waits with the GIL released, waking every
/// 50 ms to check for signals and, every `interval_s`, to call `progress(snapshot_json)`.
/// On KeyboardInterrupt (a signal, or raised inside `progress`) the engine is stopped within
/// ~50 ms and the partial result is returned with `"interrupted": true`. Any other exception
/// raised by `progress` stops the engine and is re-raised. `progress` returning `True` stops
/// the engine too, with a complete (not interrupted) result: "enough", e.g. a steady warm-up.
#[pyfunction]
#[pyo3(signature = (spec_json, progress=None, interval_s=0.25))]
fn run_load(
    py: Python<'_>,
    spec_json: &str,
    progress: Option<Py<PyAny>>,
    interval_s: f64,
) -> PyResult<String> {
    let spec = LoadSpec::from_json(spec_json).map_err(PyValueError::new_err)?;
    if !(interval_s.is_finite() && interval_s > 0.0) {
        return Err(PyValueError::new_err("interval_s: must be > 0"));
    }
    // Without the GIL: the engine may wait for the spec's `start_at_unix_ns`.
    let running = py
        .detach(|| pywebbench_engine::start(&spec))
        .map_err(|e| match e {
            StartError::Invalid(m) => PyValueError::new_err(m),
            StartError::System(m) => PyOSError::new_err(m),
        })?;
    let (interrupted, callback_error) = drive(py, &running, progress.as_ref(), interval_s);
    let result = py.detach(|| running.join(interrupted));
    if let Some(e) = callback_error {
        return Err(e);
    }
    Ok(result.to_json())
}

/// A run the binding waits on: `RunningLoad` or `RunningSlices`.
trait Driven: Sync {
    fn wait(&self, d: Duration) -> bool;
    fn snapshot(&self) -> String;
    fn stop(&self);
    fn finish_early(&self);
}

impl Driven for pywebbench_engine::RunningLoad {
    fn wait(&self, d: Duration) -> bool {
        self.wait_timeout(d)
    }
    fn snapshot(&self) -> String {
        serde_json::to_string(&self.progress()).unwrap_or_default()
    }
    fn stop(&self) {
        pywebbench_engine::RunningLoad::stop(self)
    }
    fn finish_early(&self) {
        pywebbench_engine::RunningLoad::finish_early(self)
    }
}

impl Driven for pywebbench_engine::RunningSlices {
    fn wait(&self, d: Duration) -> bool {
        self.wait_timeout(d)
    }
    fn snapshot(&self) -> String {
        serde_json::to_string(&self.progress()).unwrap_or_default()
    }
    fn stop(&self) {
        pywebbench_engine::RunningSlices::stop(self)
    }
    fn finish_early(&self) {
        pywebbench_engine::RunningSlices::finish_early(self)
    }
}

/// Wait for a run with the GIL released, calling `progress(snapshot_json)` every
/// `interval_s`; see `run_load` for the rules. Returns (interrupted, the callback's error).
fn drive<R: Driven>(
    py: Python<'_>,
    running: &R,
    progress: Option<&Py<PyAny>>,
    interval_s: f64,
) -> (bool, Option<PyErr>) {
    let interval = Duration::from_secs_f64(interval_s);
    let mut next_progress = Instant::now() + interval;
    let mut interrupted = false;
    let mut callback_error: Option<PyErr> = None;
    let mut enough = false;
    loop {
        let finished = py.detach(|| running.wait(TICK));
        if finished {
            break;
        }
        if py.check_signals().is_err() {
            // KeyboardInterrupt (or another signal handler's exception): stop, return partial.
            interrupted = true;
            break;
        }
        if let Some(cb) = progress {
            if Instant::now() >= next_progress {
                next_progress += interval;
                match cb.call1(py, (running.snapshot(),)) {
                    // `True` from the callback: enough (e.g. a warm-up that reached its steady
                    // state). The run stops and its result is complete, not interrupted.
                    Ok(answer) => {
                        if answer.extract::<bool>(py).unwrap_or(false) {
                            enough = true;
                            break;
                        }
                    }
                    Err(e) => {
                        // Ctrl-C landing inside the callback is an interrupt like any other.
                        if !e.is_instance_of::<PyKeyboardInterrupt>(py) {
                            callback_error = Some(e);
                        }
                        interrupted = true;
                        break;
                    }
                }
            }
        }
    }
    if interrupted {
        running.stop();
    } else if enough {
        running.finish_early();
    }
    if interrupted || enough {
        py.detach(|| running.wait(STOP_WAIT));
    }
    (interrupted, callback_error)
}

/// Run an interleaved sliced plan (JSON, docs/load-engine.md "Interleaved slices") and
/// return its result (JSON). Waiting, signals and `progress` as in `run_load`; the snapshot
/// lists the slices complete so far, and `True` from `progress` ends the run early with a
/// complete result (`stopped_early`).
#[pyfunction]
#[pyo3(signature = (spec_json, progress=None, interval_s=0.25))]
fn run_sliced(
    py: Python<'_>,
    spec_json: &str,
    progress: Option<Py<PyAny>>,
    interval_s: f64,
) -> PyResult<String> {
    let spec =
        pywebbench_engine::SlicedSpec::from_json(spec_json).map_err(PyValueError::new_err)?;
    if !(interval_s.is_finite() && interval_s > 0.0) {
        return Err(PyValueError::new_err("interval_s: must be > 0"));
    }
    let running = py
        .detach(|| pywebbench_engine::slices::start(&spec))
        .map_err(|e| match e {
            StartError::Invalid(m) => PyValueError::new_err(m),
            StartError::System(m) => PyOSError::new_err(m),
        })?;
    let (interrupted, callback_error) = drive(py, &running, progress.as_ref(), interval_s);
    let result = py.detach(|| running.join(interrupted));
    if let Some(e) = callback_error {
        return Err(e);
    }
    Ok(result.to_json())
}

/// Merge HdrHistograms (V2+DEFLATE base64) into one.
#[pyfunction]
fn hist_merge(items: Vec<String>) -> PyResult<String> {
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    hist::merge_encoded(&refs).map_err(PyValueError::new_err)
}

/// Values (microseconds) at the given quantiles (0..1) of an encoded histogram.
#[pyfunction]
fn hist_quantiles(encoded: &str, quantiles: Vec<f64>) -> PyResult<Vec<f64>> {
    let h = hist::decode(encoded).map_err(PyValueError::new_err)?;
    Ok(hist::quantiles(&h, &quantiles)
        .into_iter()
        .map(|v| v as f64)
        .collect())
}

/// Summary of an encoded histogram: count, min, max, mean, stdev, p50, p90, p99, p999, p9999.
#[pyfunction]
fn hist_summary<'py>(py: Python<'py>, encoded: &str) -> PyResult<Bound<'py, PyDict>> {
    let h = hist::decode(encoded).map_err(PyValueError::new_err)?;
    let s = hist::summary(&h);
    let d = PyDict::new(py);
    d.set_item("count", s.count)?;
    d.set_item("min", s.min)?;
    d.set_item("max", s.max)?;
    d.set_item("mean", s.mean)?;
    d.set_item("stdev", s.stdev)?;
    d.set_item("p50", s.p50)?;
    d.set_item("p90", s.p90)?;
    d.set_item("p99", s.p99)?;
    d.set_item("p999", s.p999)?;
    d.set_item("p9999", s.p9999)?;
    Ok(d)
}

/// Distribution of an encoded histogram as (value_us, count) pairs of recorded buckets,
/// and as (value_us, percentile) pairs of the percentile spectrum (for reports).
#[pyfunction]
#[pyo3(signature = (encoded, ticks_per_half_distance=5))]
fn hist_spectrum(encoded: &str, ticks_per_half_distance: u32) -> PyResult<Vec<(u64, f64, u64)>> {
    let h = hist::decode(encoded).map_err(PyValueError::new_err)?;
    if h.is_empty() {
        return Ok(Vec::new());
    }
    Ok(h.iter_quantiles(ticks_per_half_distance.max(1))
        .map(|v| {
            (
                v.value_iterated_to(),
                v.quantile_iterated_to(),
                v.count_since_last_iteration(),
            )
        })
        .collect())
}

/// Merge result documents (JSON) of runs made at the same time by several load agents.
#[pyfunction]
fn merge_results(items: Vec<String>) -> PyResult<String> {
    let mut rs = Vec::with_capacity(items.len());
    for s in &items {
        rs.push(pywebbench_engine::LoadResult::from_json(s).map_err(PyValueError::new_err)?);
    }
    Ok(pywebbench_engine::merge(&rs)
        .map_err(PyValueError::new_err)?
        .to_json())
}

/// The stable error class names, in the engine's order (keys of a result's `error_classes`).
#[pyfunction]
fn error_classes() -> Vec<&'static str> {
    pywebbench_engine::errors::ALL_CLASSES
        .iter()
        .map(|c| c.name())
        .collect()
}

/// Record values (microseconds) into a fresh histogram and return it encoded (for tests and
/// for merging figures measured elsewhere).
#[pyfunction]
fn hist_from_values(values: Vec<u64>) -> String {
    let mut h = hist::new_hist();
    for v in values {
        hist::record(&mut h, v);
    }
    hist::encode(&h)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(spec_validate, m)?)?;
    m.add_function(wrap_pyfunction!(run_load, m)?)?;
    m.add_function(wrap_pyfunction!(run_sliced, m)?)?;
    m.add_function(wrap_pyfunction!(hist_merge, m)?)?;
    m.add_function(wrap_pyfunction!(hist_quantiles, m)?)?;
    m.add_function(wrap_pyfunction!(hist_summary, m)?)?;
    m.add_function(wrap_pyfunction!(hist_spectrum, m)?)?;
    m.add_function(wrap_pyfunction!(hist_from_values, m)?)?;
    m.add_function(wrap_pyfunction!(merge_results, m)?)?;
    m.add_function(wrap_pyfunction!(error_classes, m)?)?;
    Ok(())
}
