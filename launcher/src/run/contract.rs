//! The contract a sealed command gets (`LIBSEAL_*`), built from the rows of
//! `seal_abi::setting_rows!`: the fields the launcher finds per run as given, and each
//! setting's from the resolved [`Settings`] field of the same name. A new setting that sealed
//! processes get needs nothing here.

use crate::config::Settings;
use seal_abi::settings::Run;

/// Generates [`encode_contract`] from the rows (the user's side of each row is
/// `config/table.rs`'s).
macro_rules! contract {
    (
        run_fields { $($rfield:ident)* }
        shim_fields { $($field:ident)* }
        $($rows:tt)*
    ) => {
        /// Hands `put` every contract variable of a run: `run`'s fields as given, each
        /// setting's from the resolved field of its name.
        pub fn encode_contract(settings: &Settings, run: Run<'_>, put: impl FnMut(&'static str, &[u8])) {
            $( let $field = ToContract::held(&settings.$field); )*
            seal_abi::settings::Settings {
                $( $rfield: run.$rfield, )*
                $( $field: Lend::lend(&$field), )*
            }
            .encode(put)
        }
    };
}

seal_abi::setting_rows!(contract);

/// A resolved setting's type, as its contract field holds it: a number as it is, a string as
/// its bytes, a list one item a line.
trait ToContract {
    type Held: for<'a> Lend<'a>;
    fn held(&self) -> Self::Held;
}

/// What a contract field borrows from a held value.
trait Lend<'a> {
    type Out;
    fn lend(&'a self) -> Self::Out;
}

macro_rules! numbers_as_they_are {
    ($($t:ty),*) => {$(
        impl ToContract for $t {
            type Held = $t;
            fn held(&self) -> $t {
                *self
            }
        }
        impl Lend<'_> for $t {
            type Out = $t;
            fn lend(&self) -> $t {
                *self
            }
        }
    )*};
}

numbers_as_they_are!(i64, u64, u32);

impl<'a> Lend<'a> for Vec<u8> {
    type Out = &'a [u8];
    fn lend(&'a self) -> &'a [u8] {
        self
    }
}

impl ToContract for String {
    type Held = Vec<u8>;
    fn held(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}

impl ToContract for Vec<String> {
    type Held = Vec<u8>;
    fn held(&self) -> Vec<u8> {
        self.join("\n").into_bytes()
    }
}
