//! Host names: `gethostname`, `uname().nodename`, `getdomainname` return the run's fixed name.
//!
//! TODO(host): not implemented yet.
