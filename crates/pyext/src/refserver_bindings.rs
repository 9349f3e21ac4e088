//! Bindings of the reference server: `refserver_serve`, `refserver_config_defaults`,
//! `refserver_modes`, `refserver_validate`.
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pywebbench_refserver::{Error, Mode, RefServer, RefServerConfig};

fn parse_config(config_json: &str) -> PyResult<RefServerConfig> {
    RefServerConfig::from_json(config_json).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Runs the reference server in this process until a signal handler raises (SIGINT's
/// KeyboardInterrupt, or whatever a SIGTERM handler raises).
///
/// The GIL is released while serving; signals are checked every 50 ms. `ready(port)` is
/// called once the port accepts connections. It never returns normally: when a signal
/// handler raises, the server is stopped (all connections closed) and the exception
/// propagates; if an event-loop thread dies, RuntimeError carries the final counters.
/// A bad config raises ValueError naming the field; a failed bind raises OSError.
#[pyfunction]
#[pyo3(signature = (config_json, ready=None))]
fn refserver_serve(
    py: Python<'_>,
    config_json: &str,
    ready: Option<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let config = parse_config(config_json)?;
    let server = py
        .detach(|| RefServer::start(&config))
        .map_err(|e| match e {
            Error::Config(c) => PyValueError::new_err(c.to_string()),
            other => PyOSError::new_err(other.to_string()),
        })?;
    if let Some(cb) = ready {
        cb.call1((server.port(),))?;
    }
    loop {
        let running = py.detach(|| {
            std::thread::sleep(Duration::from_millis(50));
            server.is_running()
        });
        if let Err(e) = py.check_signals() {
            py.detach(|| drop(server));
            return Err(e);
        }
        if !running {
            let stats = py.detach(|| server.stop());
            return Err(PyRuntimeError::new_err(format!(
                "refserver: an event-loop thread stopped unexpectedly; final stats: {stats}"
            )));
        }
    }
}

/// The default config as JSON (every field, with its default value).
#[pyfunction]
fn refserver_config_defaults() -> String {
    RefServerConfig::default().to_json()
}

/// Names of the misbehaviour modes, in a stable order.
#[pyfunction]
fn refserver_modes() -> Vec<&'static str> {
    Mode::ALL.iter().map(|m| m.name()).collect()
}

/// Validates a JSON config; raises ValueError naming the bad field.
#[pyfunction]
fn refserver_validate(config_json: &str) -> PyResult<()> {
    parse_config(config_json).map(|_| ())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(refserver_serve, m)?)?;
    m.add_function(wrap_pyfunction!(refserver_config_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(refserver_modes, m)?)?;
    m.add_function(wrap_pyfunction!(refserver_validate, m)?)?;
    Ok(())
}
