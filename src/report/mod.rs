//! Presentation of results: terminal tables now; HTML report and compare later.

pub mod table;
