//! Shared pieces of the rds-tools programs (`rds-stress`, `rds-ping`, `rds-info`): command-line
//! option parsing in the style of `getopt(3)` and the socket calls the programs need beyond
//! `librds` (which decodes the `RDS_INFO_*` tables).
//!
//! The programs behave like the classic tools of Oracle's rds-tools package and work against
//! any RDS implementation: Linux's C RDS or rds-rs.

pub mod getopt;
pub mod sys;
