//! pywebbench's load-generation engine. See docs/architecture.md.
