//! pywebbench's reference server. See docs/architecture.md.
