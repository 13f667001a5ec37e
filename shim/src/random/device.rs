//! Reads of `/dev/urandom`, `/dev/random`, `/proc/sys/kernel/random/uuid` and `boot_id`,
//! however they are opened (`open`, `open64`, `openat`, `fopen`, shell redirection) and read
//! (`read`, stdio, a child that inherited the fd).
//!
//! TODO(device): not implemented yet; see the design notes in the issue.
