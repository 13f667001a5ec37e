//! OpenSSL's generator under seal: `RAND_bytes` and its siblings draw from the sealed stream,
//! so what a program draws through OpenSSL no longer moves with the lengths of the strings it
//! copied to the heap first (OpenSSL 3 puts its DRBG's heap address into the DRBG's nonce):
//! the script path on Node's command line, the environment's size and the working directory
//! PHP, Ruby and Python import. Node carries OpenSSL in its own executable (patched at image
//! start); PHP, Ruby's `openssl` and Python's `ssl` load libcrypto (hooked).

use std::path::Path;

use crate::util::*;

/// A relative directory name of 110 characters (the issue's "110-character relative path").
fn long_rel() -> String {
    format!("{}/x", "d".repeat(108))
}

/// Runs `cmd` sealed in `cwd` with `env` added, twice, and returns the (agreed) stdout.
fn sealed_in(cwd: &Path, env: &[(&str, String)], extra: &[&str], cmd: &[&str]) -> String {
    let run = || {
        let mut c = seal_in(cwd, extra, cmd);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = run_timeout(c, TIMEOUT);
        out.ok();
        out
    };
    let first = run();
    let second = run();
    second.same_stdout_as(&first);
    first.stdout.clone()
}

/// The issue's reproduction: `node a/r.js` against the same file under a 110-character
/// relative path, and named by its absolute path, from two working directories.
#[test]
fn node_values_do_not_move_with_the_script_path_on_the_command_line() {
    if !have("node") {
        report_skip("openssl_random", false, "node not installed");
        return;
    }
    let js = "console.log(Math.random(), require('crypto').randomUUID(), \
              require('crypto').randomBytes(8).toString('hex'))\n";
    let d = private_tmpdir();
    let top = d.path().join("top");
    let deep = top.join("e".repeat(100));
    let short = top.join("a");
    let long = top.join(long_rel());
    for dir in [&short, &long, &deep] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("r.js"), js).unwrap();
    }
    let abs = long.join("r.js").display().to_string();
    let long_arg = format!("{}/r.js", long_rel());
    let cases: Vec<(&Path, Vec<&str>)> = vec![
        (&top, vec!["node", "a/r.js"]),
        (&top, vec!["node", &long_arg]),
        (&top, vec!["node", &abs]),
        (&deep, vec!["node", "r.js"]),
        (&short, vec!["node", "r.js"]),
    ];
    let mut outs = Vec::new();
    for (cwd, cmd) in &cases {
        outs.push((cmd.join(" "), sealed_in(cwd, &[], &[], cmd)));
    }
    for (how, out) in &outs[1..] {
        assert_eq!(out, &outs[0].1, "`{how}` differs from `{}`", outs[0].0);
    }
    // Node's draws are OpenSSL's, counted as such (V8's seed, the UUID buffer, randomBytes).
    let script = short.join("r.js");
    let (out, totals) = census_totals(&["node", script.to_str().unwrap()], "random");
    out.ok();
    let rand = totals
        .iter()
        .find(|(s, _)| s.starts_with("RAND_bytes"))
        .map(|t| t.1);
    assert_eq!(rand, Some(6), "{totals:?}\n{}", out.show());
    // Unsealed, OpenSSL is left its own (the real generator: runs differ).
    let a = sealed_in_once(&short, &["--unseal", "random"], &["node", "r.js"]);
    let b = sealed_in_once(&short, &["--unseal", "random"], &["node", "r.js"]);
    assert_ne!(a, b, "--unseal random should give OpenSSL's own draws");
}

fn sealed_in_once(cwd: &Path, extra: &[&str], cmd: &[&str]) -> String {
    let out = run_timeout(seal_in(cwd, extra, cmd), TIMEOUT);
    out.ok();
    out.stdout
}

/// One way to run a program: its name, working directory and added variables.
type Variant<'a> = (&'a str, &'a Path, Vec<(&'a str, String)>);

/// PHP's `openssl_random_pseudo_bytes`, Ruby's `OpenSSL::Random` and Python's
/// `ssl.RAND_bytes` (each through a shared libcrypto): one value whatever the environment's
/// size, `HOME`'s length and the working directory's depth.
#[test]
fn openssl_draws_of_php_ruby_and_python_do_not_move_with_environment_or_directory() {
    let programs: [(&str, Vec<&str>); 3] = [
        (
            "php",
            vec![
                "php",
                "-r",
                "echo bin2hex(openssl_random_pseudo_bytes(16)), \"\\n\";",
            ],
        ),
        (
            "ruby",
            vec![
                "ruby",
                "-ropenssl",
                "-e",
                "puts OpenSSL::Random.random_bytes(16).unpack1('H*')",
            ],
        ),
        (
            "python3",
            vec![
                "python3",
                "-c",
                "import ssl; print(ssl.RAND_bytes(16).hex())",
            ],
        ),
    ];
    let d = private_tmpdir();
    let home_short = d.path().join("h");
    let home_long = d.path().join("h".repeat(120));
    let deep = d.path().join("w".repeat(100)).join("v".repeat(60));
    for p in [&home_short, &home_long, &deep] {
        std::fs::create_dir_all(p).unwrap();
    }
    let hs = home_short.display().to_string();
    let hl = home_long.display().to_string();
    let variants: Vec<Variant> = vec![
        ("plain", d.path(), vec![("HOME", hs.clone())]),
        (
            "3 KB more environment",
            d.path(),
            vec![("HOME", hs.clone()), ("EXTRA_PAD", "p".repeat(3000))],
        ),
        ("a 120-character HOME", d.path(), vec![("HOME", hl)]),
        (
            "a 160-character-deeper directory",
            &deep,
            vec![("HOME", hs)],
        ),
    ];
    let mut tried = 0;
    for (name, cmd) in &programs {
        if !have(name) {
            report_skip("openssl_random", true, &format!("{name} not installed"));
            continue;
        }
        tried += 1;
        let outs: Vec<(&str, String)> = variants
            .iter()
            .map(|(what, cwd, env)| (*what, sealed_in(cwd, env, &[], cmd)))
            .collect();
        assert_eq!(outs[0].1.trim().len(), 32, "{name}: {}", outs[0].1);
        for (what, out) in &outs[1..] {
            assert_eq!(out, &outs[0].1, "{name} with {what} differs from plain");
        }
    }
    if tried == 0 {
        return;
    }
    // One draw each, counted as OpenSSL's.
    for (name, cmd) in &programs[..2] {
        if !have(name) {
            continue;
        }
        let (out, totals) = census_totals(cmd, "random");
        out.ok();
        let rand = totals.iter().find(|(s, _)| s.starts_with("RAND_bytes"));
        assert_eq!(rand.map(|t| t.1), Some(1), "{name}: {totals:?}");
    }
}
