//! Every setting of a run, declared once: what a user gives (the `seal` flag with its help, the
//! `SEAL_*` variable, the `seal.toml` key, whether a golden case may set it) and, for what
//! sealed processes get, its contract variable (`LIBSEAL_*`), field, type and default.
//!
//! Both crates build from these rows: [`crate::settings`] the contract (constants,
//! [`crate::settings::VARS`], the struct, its encoding and decoding), the launcher its flags,
//! `[seal]` keys, case keys, property tests and the contract it hands to the command. The
//! launcher's tokens (clap attributes, `toml` types) are only passed through here: this crate
//! never expands them. A new setting is one row here, its parse in the launcher's
//! `config/resolve.rs` (a field of the same name), the code that uses it, and its rows in
//! docs/usage.md (a launcher test checks them).

/// Hands the rows to the macro `$then`, parsed once here and given again in sections that
/// each side matches without repeating the grammar: `run_fields { field… }`, `shim_fields {
/// field… }` (the contract fields of the settings), `run { row… }`, `shim { row… }` (the
/// contract rows as `{ docs } N CONST "LIBSEAL_X" field type, default, { fix }`), `user { row… }` (the user's side of each setting).
///
/// - `run` rows are contract variables the launcher finds per run (no user setting):
///   `[N] CONST = "LIBSEAL_X" => field: type = default (, fix f)?;`
/// - `user` rows, in `seal run --help` order: doc comments (the help), `#[arg(…)]` (clap),
///   `name: type` (the `SealOpts` field), then for a setting `=> "SEAL_X"`, `, file T` when
///   `[seal]` has it as a key of the field's name (`T`: `toml::Value`, `String`, `bool` or
///   `Vec<String>`), `[case]` when a golden case may set it, and `, shim` with a contract part
///   as a `run` row's when sealed processes get it (its field is the launcher's resolved
///   setting of that name).
///
/// `[N]` is the variable's place in [`crate::settings::VARS`] (the order the shim re-adds them
/// to a cleaned environment): a new one takes the next number. Types: `&'a [u8]`, `i64`, `u64`
/// or `u32` (numbers in decimal); `fix` maps a parsed value to the one used (`None`: the
/// default).
#[macro_export]
macro_rules! setting_rows {
    ($then:ident) => {
        $crate::setting_rows! { @parse $then
            run {
                /// Path of the per-run directory (census files + run table). Its presence means
                /// "sealed".
                [0] RUN_DIR = "LIBSEAL_RUN_DIR" => run_dir: &'a [u8] = b"";
                /// Path of libseal itself, re-added to `LD_PRELOAD` when a child's environment was
                /// cleaned.
                [1] SHIM = "LIBSEAL_SHIM" => shim: &'a [u8] = b"";
                /// Bit set of sealed families and options, see [`flags`] (u32, decimal).
                [5] FLAGS = "LIBSEAL_FLAGS" => flags: u32 = flags::ALL_FAMILIES;
                /// The real `CLOCK_MONOTONIC` at launch (i64 ns), what `--rate` measures from.
                [10] REAL_START = "LIBSEAL_REAL_START" => real_start_ns: i64 = 0;
                /// The run's real start for file times (i64 ns; 0: the root finds it): every file
                /// time the kernel gave before the run is below it, every one it gives in the run at
                /// or above it (family `files`). The launcher finds it while it makes the run's
                /// file-time table, which holds it too.
                [11] FILES_START = "LIBSEAL_FILES_START" => files_start_ns: i64 = 0;
            }
            user {
                /// Epoch of the sealed clocks: RFC 3339 (2026-01-01T00:00:00Z), @UNIX_SECONDS, or
                /// relative to now, resolved once at launch (now, now+2d, -15d, +1y6mo)
                /// [default: SOURCE_DATE_EPOCH, else 2026-01-01T00:00:00Z]
                #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
                epoch: Option<String> => "SEAL_EPOCH", file toml::Value [case], shim
                    /// Epoch in nanoseconds since 1970 (i64, decimal).
                    [2] EPOCH_NS = "LIBSEAL_EPOCH_NS" => epoch_ns: i64 = DEFAULT_EPOCH_NS;
                /// Seed of every entropy stream [default: 0]
                #[arg(long, value_name = "U64", allow_hyphen_values = true)]
                seed: Option<String> => "SEAL_SEED", file toml::Value [case], shim
                    /// Seed of every entropy stream (u64, decimal).
                    [4] SEED = "LIBSEAL_SEED" => seed: u64 = 0;
                /// Logical clock advance per clock read, e.g. 1us, 250ns; 0 freezes reads
                /// [default: 1us]
                #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
                tick: Option<String> => "SEAL_TICK", file toml::Value [case], shim
                    /// Logical clock tick in nanoseconds (i64, decimal; 0 freezes reads; a negative
                    /// one is 0).
                    [3] TICK_NS = "LIBSEAL_TICK_NS" => tick_ns: i64 = DEFAULT_TICK_NS,
                        fix |v: i64| Some(v.max(0));
                /// Clock reads after each wait that leave the clock still; later reads of the same
                /// stretch tick (a loop spinning on the clock still ends); 0: every read ticks
                /// [default: 0]
                #[arg(long, value_name = "N", allow_hyphen_values = true)]
                spin_after: Option<String> => "SEAL_SPIN_AFTER", file toml::Value [case], shim
                    /// Clock reads after each wait that leave the wall clock where it is (u32,
                    /// decimal; 0: every read moves it one tick). Later reads of the same stretch
                    /// tick: a loop spinning on the clock still reaches its deadline.
                    [13] SPIN_AFTER = "LIBSEAL_SPIN_AFTER" => spin_after: u32 = DEFAULT_SPIN_AFTER;
                /// Sleeps and timed waits that would time out return at once (logical time still
                /// advances)
                #[arg(long)]
                warp: bool => "SEAL_WARP", file bool [case];
                /// Clocks follow real elapsed time from the epoch, this many times as fast (1 = real
                /// speed, 10 = ten times faster, 0.5 = half); not byte-identical across runs
                /// [default: deterministic ticks]
                #[arg(long, value_name = "FACTOR", allow_hyphen_values = true)]
                rate: Option<String> => "SEAL_RATE", file toml::Value, shim
                    /// `--rate` in parts per million (u64, decimal): logical time follows the real
                    /// time since launch times the rate; 0 (the default) keeps deterministic ticks.
                    [9] RATE_PPM = "LIBSEAL_RATE_PPM" => rate_ppm: u64 = 0;
                /// Time zone for the command [default: UTC]
                #[arg(long, value_name = "ZONE")]
                tz: Option<String> => "SEAL_TZ", file String [case];
                /// Locale (LC_ALL and LANG) for the command [default: C.UTF-8]
                #[arg(long, value_name = "LOCALE")]
                locale: Option<String> => "SEAL_LOCALE", file String [case];
                /// PYTHONHASHSEED for the command [default: 0]
                #[arg(long, value_name = "U32", allow_hyphen_values = true)]
                hash_seed: Option<String> => "SEAL_HASH_SEED", file toml::Value [case];
                /// Host name the command sees [default: seal]
                #[arg(long, value_name = "NAME")]
                hostname: Option<String> => "SEAL_HOSTNAME", file String [case], shim
                    /// Fixed host name.
                    [6] HOSTNAME = "LIBSEAL_HOSTNAME" => hostname: &'a [u8] = DEFAULT_HOSTNAME;
                /// CPUs the command sees (family machine: nproc, affinity, /proc/cpuinfo), 1..=1024
                /// [default: 4]
                #[arg(long, value_name = "N", allow_hyphen_values = true)]
                cpus: Option<String> => "SEAL_CPUS", file toml::Value [case], shim
                    /// CPUs a sealed process sees (family `machine`; decimal,
                    /// [`MIN_CPUS`]`..=`[`MAX_CPUS`]; out of range: the default).
                    [12] CPUS = "LIBSEAL_CPUS" => cpus: u32 = DEFAULT_CPUS,
                        fix |n: u32| (MIN_CPUS..=MAX_CPUS).contains(&n).then_some(n);
                #[arg(long, value_name = "FAMILY", help = unseal_help())]
                unseal: Vec<String> => "SEAL_UNSEAL", file Vec<String> [case];
                /// Seal only programs whose name (or, with a `/`, path) matches this glob
                /// (repeatable); the others run with real values but pass the seal on to their
                /// children
                #[arg(long, value_name = "GLOB")]
                only: Vec<String> => "SEAL_ONLY", file Vec<String>, shim
                    /// Globs (one a line) of the programs to seal (`--only`); empty: every program.
                    [7] ONLY = "LIBSEAL_ONLY" => only: &'a [u8] = b"";
                /// Do not seal programs whose name (or, with a `/`, path) matches this glob
                /// (repeatable)
                #[arg(long, value_name = "GLOB")]
                skip: Vec<String> => "SEAL_SKIP", file Vec<String>, shim
                    /// Globs (one a line) of the programs not to seal (`--skip`).
                    [8] SKIP = "LIBSEAL_SKIP" => skip: &'a [u8] = b"";
                /// Use this seal.toml instead of searching the working directory and its parents
                #[arg(long, value_name = "FILE")]
                config: Option<std::path::PathBuf>;
                /// Print no warnings
                #[arg(short, long)]
                quiet: bool => "SEAL_QUIET";
                /// Give the run an empty /tmp and /var/tmp of its own, gone after the run (a private
                /// mount namespace; TMPDIR is unset) [default: on for verify, probe and golden, off
                /// for run and census]
                #[arg(long, conflicts_with = "no_private_tmp")]
                private_tmp: bool => "SEAL_PRIVATE_TMP";
                /// Let the run see the real /tmp and /var/tmp
                #[arg(long)]
                no_private_tmp: bool;
            }
        }
    };
    (@parse $then:ident
        run { $(
            $(#[doc = $rdoc:literal])*
            [$rpos:literal] $rkonst:ident = $rvar:literal => $rfield:ident: $rty:ty = $rdefault:expr
                $(, fix $rfix:expr)?;
        )* }
        user { $(
            $(#[doc = $udoc:literal])*
            #[arg($($arg:tt)*)]
            $opt:ident: $oty:ty $(=> $svar:literal $(, file $fty:ty)? $([$case:ident])? $(, shim
                $(#[doc = $doc:literal])*
                [$pos:literal] $konst:ident = $var:literal => $field:ident: $ty:ty = $default:expr
                    $(, fix $fix:expr)?
            )?)?;
        )* }
    ) => { $then! {
        run_fields { $($rfield)* }
        shim_fields { $( $( $( $field )? )? )* }
        run { $( { $(#[doc = $rdoc])* } $rpos $rkonst $rvar $rfield $rty, $rdefault, { $($rfix)? } )* }
        shim { $( $( $( { $(#[doc = $doc])* } $pos $konst $var $field $ty, $default, { $($fix)? } )? )? )* }
        user { $(
            $(#[doc = $udoc])* #[arg($($arg)*)] $opt: $oty $(=> $svar $(, file $fty)? $([$case])?)?;
        )* }
    } };
}
