//! Bindings of the engine's fault clients (`pywebbench_engine::faults`): `faults_start`
//! returns a `FaultRun` that runs the fault clients on a background thread until `stop()`.
use std::sync::Mutex;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pywebbench_engine::faults::{report_to_json, FaultKind, FaultSession};

/// Fault clients running beside a load run. `stop()` ends them and returns the report JSON.
#[pyclass(name = "FaultRun", module = "pywebbench._engine")]
struct FaultRun {
    session: Mutex<Option<FaultSession>>,
}

#[pymethods]
impl FaultRun {
    /// True while the fault clients run (they end by themselves at `max_duration_s`, or when
    /// every kind is a finished `count`).
    fn running(&self) -> bool {
        self.session
            .lock()
            .map(|s| s.as_ref().is_some_and(|s| s.is_running()))
            .unwrap_or(false)
    }

    /// Stops the fault clients (within ~100 ms, GIL released) and returns the report as
    /// JSON. A second call returns the report of an empty run.
    fn stop(&self, py: Python<'_>) -> String {
        let session = self.session.lock().ok().and_then(|mut s| s.take());
        py.detach(move || match session {
            Some(mut s) => report_to_json(&s.stop()),
            None => report_to_json(&Default::default()),
        })
    }
}

/// Starts fault clients from a JSON document: `{"target": "127.0.0.1:PORT", "host": ...,
/// "path": "/hello", "max_duration_s": 60, "faults": [{"kind": "slow-headers",
/// "connections": 50}, ...]}`. Raises ValueError naming the bad field.
#[pyfunction]
fn faults_start(spec_json: &str) -> PyResult<FaultRun> {
    let session = FaultSession::start_json(spec_json).map_err(PyValueError::new_err)?;
    Ok(FaultRun {
        session: Mutex::new(Some(session)),
    })
}

/// Every fault kind as (name, held, malformed).
#[pyfunction]
fn faults_kinds() -> Vec<(&'static str, bool, bool)> {
    FaultKind::ALL
        .iter()
        .map(|k| (k.name(), k.is_held(), k.is_malformed()))
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<FaultRun>()?;
    m.add_function(wrap_pyfunction!(faults_start, m)?)?;
    m.add_function(wrap_pyfunction!(faults_kinds, m)?)?;
    Ok(())
}
