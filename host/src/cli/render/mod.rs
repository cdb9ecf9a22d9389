//! How the library's typed answers look on a terminal: text and JSON renderings the
//! read commands print.

pub mod history;
pub mod tree;
