//! Where the advisory DB lives: `--db DIR`, then `PATCHPILOT_DB`, then the
//! configuration's value, then `$XDG_DATA_HOME/patchpilot/db`, then
//! `~/.local/share/patchpilot/db`. The last two follow the XDG Base
//! Directory Specification, which says a relative `XDG_DATA_HOME` is
//! invalid and must be ignored.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Error;

/// The DB directory: `cli` (`--db DIR`), then the `PATCHPILOT_DB`
/// environment variable, then `config` (the configuration's value), then
/// `$XDG_DATA_HOME/patchpilot/db`, then `$HOME/.local/share/patchpilot/db`.
/// Empty environment variables count as unset.
pub fn resolve_dir(cli: Option<&Path>, config: Option<&Path>) -> Result<PathBuf, Error> {
    resolve_dir_with(cli, config, |name| std::env::var_os(name))
}

/// [`resolve_dir`] with the environment passed in, so tests need not change
/// the process environment.
fn resolve_dir_with(
    cli: Option<&Path>,
    config: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<PathBuf, Error> {
    let set = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    if let Some(dir) = cli {
        return Ok(dir.to_owned());
    }
    if let Some(dir) = set("PATCHPILOT_DB") {
        return Ok(dir);
    }
    if let Some(dir) = config {
        return Ok(dir.to_owned());
    }
    if let Some(data_home) = set("XDG_DATA_HOME").filter(|dir| dir.is_absolute()) {
        return Ok(data_home.join("patchpilot").join("db"));
    }
    if let Some(home) = set("HOME") {
        return Ok(home.join(".local").join("share").join("patchpilot").join("db"));
    }
    Err(Error::NoDbDir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| OsString::from(value))
    }

    #[test]
    fn precedence() {
        let all = [("PATCHPILOT_DB", "/env/db"), ("XDG_DATA_HOME", "/xdg"), ("HOME", "/home/u")];
        let cli = Path::new("/cli/db");
        let config = Path::new("/config/db");
        assert_eq!(resolve_dir_with(Some(cli), Some(config), env(&all)).expect("cli"), cli);
        assert_eq!(resolve_dir_with(None, Some(config), env(&all)).expect("env"), Path::new("/env/db"));
        let no_env_db = [("XDG_DATA_HOME", "/xdg"), ("HOME", "/home/u")];
        assert_eq!(resolve_dir_with(None, Some(config), env(&no_env_db)).expect("config"), config);
        assert_eq!(
            resolve_dir_with(None, None, env(&no_env_db)).expect("xdg"),
            Path::new("/xdg/patchpilot/db")
        );
        assert_eq!(
            resolve_dir_with(None, None, env(&[("HOME", "/home/u")])).expect("home"),
            Path::new("/home/u/.local/share/patchpilot/db")
        );
    }

    #[test]
    fn empty_and_relative_values_are_ignored() {
        let vars = [("PATCHPILOT_DB", ""), ("XDG_DATA_HOME", "relative/data"), ("HOME", "/home/u")];
        assert_eq!(
            resolve_dir_with(None, None, env(&vars)).expect("home"),
            Path::new("/home/u/.local/share/patchpilot/db")
        );
        assert!(matches!(resolve_dir_with(None, None, env(&[("HOME", "")])), Err(Error::NoDbDir)));
        assert!(matches!(resolve_dir_with(None, None, env(&[])), Err(Error::NoDbDir)));
    }
}
