//! The files a user names: read through [`infile`] (regular files, size-capped), written
//! through [`outfile`] (never led elsewhere by a link).

pub mod infile;
pub mod outfile;
