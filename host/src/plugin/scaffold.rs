//! `crewbox plugin new`: a plugin project in Rust, Python or JavaScript that builds on
//! its own, outside this repository. The WIT contract is vendored into `wit/` (from the
//! copy built into crewbox, so it is the contract this crewbox speaks), the Rust SDK
//! into `sdk/` with plain keys (nothing inherited from crewbox's workspace), and
//! `crewbox-plugin.toml` says what `crewbox plugin build` does there.

use std::path::{Path, PathBuf};

use super::kind::PluginKind;

/// The manifest `crewbox plugin build` reads.
pub const MANIFEST: &str = "crewbox-plugin.toml";

/// The WIT contract, as this crewbox speaks it.
const WIT: &str = include_str!("../../../wit/plugin.wit");

/// The SDK's sources, vendored as they are; only the WIT path changes (see [`sdk_lib`]).
const SDK_FILES: &[(&str, &str)] = &[
    (
        "helpers.rs",
        include_str!("../../../plugins/sdk/src/helpers.rs"),
    ),
    ("log.rs", include_str!("../../../plugins/sdk/src/log.rs")),
    (
        "model.rs",
        include_str!("../../../plugins/sdk/src/model.rs"),
    ),
    (
        "workspace.rs",
        include_str!("../../../plugins/sdk/src/workspace.rs"),
    ),
];
const SDK_LIB: &str = include_str!("../../../plugins/sdk/src/lib.rs");
/// Where the SDK finds the WIT in this repository, and in a scaffolded project.
const SDK_WIT_HERE: &str = "path: \"../../wit\"";
const SDK_WIT_THERE: &str = "path: \"../wit\"";

/// A plugin's language, which decides its toolchain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    /// Rust with the crewbox SDK, built by cargo for `wasm32-wasip2`.
    Rust,
    /// Python, built by componentize-py.
    Python,
    /// JavaScript, built by jco / componentize-js.
    Js,
}

impl Lang {
    /// Parses the name used on the command line.
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Rust, Self::Python, Self::Js]
            .into_iter()
            .find(|l| l.as_str() == s)
    }

    /// The name used in the manifest and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rust => "rust",
            Self::Python => "python",
            Self::Js => "js",
        }
    }
}

/// What `crewbox-plugin.toml` holds.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name: its component is `NAME.wasm`.
    pub name: String,
    /// Its kind.
    pub kind: PluginKind,
    /// Its language.
    pub lang: Lang,
    /// The WIT world it targets (`judge` for a validator that asks the model).
    pub world: String,
}

impl Manifest {
    /// The manifest as TOML (each string quoted by the TOML writer).
    pub fn to_toml(&self) -> String {
        let quoted = |v: &str| toml::Value::String(v.to_owned()).to_string();
        format!(
            "name = {}\nkind = {}\nlang = {}\nworld = {}\n",
            quoted(&self.name),
            quoted(self.kind.as_str()),
            quoted(self.lang.as_str()),
            quoted(&self.world),
        )
    }

    /// The world a kind targets by default: the one without the model.
    pub fn default_world(kind: PluginKind) -> &'static str {
        match kind {
            PluginKind::Dispatcher => "dispatcher",
            PluginKind::Validator => "validator",
            PluginKind::Role => "role",
        }
    }

    /// Reads `dir/crewbox-plugin.toml`.
    pub fn read(dir: &Path) -> Result<Self, ScaffoldError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|source| ScaffoldError::Io {
            path: path.clone(),
            source,
        })?;
        let manifest: Self = toml::from_str(&text).map_err(|e| ScaffoldError::Manifest {
            path: path.clone(),
            reason: crate::text::toml_error(&e, &text),
        })?;
        check_name(&manifest.name)?;
        let worlds: &[&str] = match manifest.kind {
            PluginKind::Validator => &["validator", "judge"],
            kind => &[Self::default_world(kind)],
        };
        if !worlds.contains(&manifest.world.as_str()) {
            return Err(ScaffoldError::Manifest {
                path,
                reason: format!(
                    "world `{}` is not one a {} implements ({})",
                    manifest.world,
                    manifest.kind,
                    worlds.join(", ")
                ),
            });
        }
        Ok(manifest)
    }
}

/// Why a project could not be created or read.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The name is not usable as a crate, module and file name.
    #[error(
        "plugin name `{0}` must be 1 to 64 lowercase letters, digits and `-`, starting with a letter"
    )]
    Name(String),
    /// The target directory exists and is not empty.
    #[error("{} already exists and is not empty", .0.display())]
    Exists(PathBuf),
    /// The manifest does not parse or says something impossible.
    #[error("{}: {reason}", path.display())]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let ok = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::Name(name.to_owned()))
    }
}

/// The SDK's `lib.rs` with the WIT path of a scaffolded project.
fn sdk_lib() -> String {
    debug_assert!(SDK_LIB.contains(SDK_WIT_HERE));
    SDK_LIB.replace(SDK_WIT_HERE, SDK_WIT_THERE)
}

fn fill(template: &str, name: &str) -> String {
    template
        .replace("{{name}}", name)
        .replace("{{version}}", env!("CARGO_PKG_VERSION"))
}

/// The files of a new project, relative to its directory.
pub fn files(name: &str, kind: PluginKind, lang: Lang) -> Vec<(PathBuf, String)> {
    let manifest = Manifest {
        name: name.to_owned(),
        kind,
        lang,
        world: Manifest::default_world(kind).to_owned(),
    };
    let mut out = vec![
        (
            PathBuf::from(MANIFEST),
            format!(
                "# What `crewbox plugin build` builds here. A validator that asks the model\n\
                 # targets world = \"judge\" (it then loads only with a model grant).\n{}",
                manifest.to_toml()
            ),
        ),
        (PathBuf::from("wit/plugin.wit"), WIT.to_owned()),
        (PathBuf::from("README.md"), readme(name, kind, lang)),
    ];
    let source = |t: &str| fill(t, name);
    match lang {
        Lang::Rust => {
            let lib = match kind {
                PluginKind::Validator => include_str!("templates/rust_validator.rs"),
                PluginKind::Dispatcher => include_str!("templates/rust_dispatcher.rs"),
                PluginKind::Role => include_str!("templates/rust_role.rs"),
            };
            out.push((
                "Cargo.toml".into(),
                source(include_str!("templates/rust_Cargo.toml")),
            ));
            out.push(("src/lib.rs".into(), source(lib)));
            out.push((
                "sdk/Cargo.toml".into(),
                source(include_str!("templates/sdk_Cargo.toml")),
            ));
            out.push(("sdk/src/lib.rs".into(), sdk_lib()));
            for (file, text) in SDK_FILES {
                out.push((Path::new("sdk/src").join(file), (*text).to_owned()));
            }
            out.push((
                ".gitignore".into(),
                "/target\n/Cargo.lock\n/*.wasm\n".into(),
            ));
        }
        Lang::Python => {
            let app = match kind {
                PluginKind::Validator => include_str!("templates/py_validator.py"),
                PluginKind::Dispatcher => include_str!("templates/py_dispatcher.py"),
                PluginKind::Role => include_str!("templates/py_role.py"),
            };
            out.push(("app.py".into(), source(app)));
            out.push((
                "crewbox_stdio.py".into(),
                include_str!("templates/py_stdio.py").into(),
            ));
            out.push((
                ".gitignore".into(),
                "/.venv\n__pycache__/\n/*.wasm\n".into(),
            ));
        }
        Lang::Js => {
            let app = match kind {
                PluginKind::Validator => include_str!("templates/js_validator.js"),
                PluginKind::Dispatcher => include_str!("templates/js_dispatcher.js"),
                PluginKind::Role => include_str!("templates/js_role.js"),
            };
            let prelude = include_str!("templates/js_prelude.js");
            let (head, body) = app.split_once("\n\n").unwrap_or(("", app));
            out.push((
                "plugin.js".into(),
                source(&format!("{head}\n\n{prelude}\n{body}")),
            ));
            out.push((
                "package.json".into(),
                source(include_str!("templates/js_package.json")),
            ));
            out.push((".gitignore".into(), "/node_modules\n/*.wasm\n".into()));
        }
    }
    out
}

/// Creates the project `dir/NAME` (`dir` must not hold a non-empty `NAME`) and returns
/// its path. Blocking.
pub fn create(
    dir: &Path,
    name: &str,
    kind: PluginKind,
    lang: Lang,
) -> Result<PathBuf, ScaffoldError> {
    check_name(name)?;
    let root = dir.join(name);
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| ScaffoldError::Io { path, source }
    };
    if let Ok(mut entries) = std::fs::read_dir(&root)
        && entries.next().is_some()
    {
        return Err(ScaffoldError::Exists(root));
    }
    for (rel, text) in files(name, kind, lang) {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&path, text).map_err(io(&path))?;
    }
    Ok(root)
}

fn readme(name: &str, kind: PluginKind, lang: Lang) -> String {
    let (edit, toolchain) = match lang {
        Lang::Rust => (
            "src/lib.rs",
            "cargo with the `wasm32-wasip2` target (added with rustup when missing); the SDK is \
             vendored in `sdk/`",
        ),
        Lang::Python => (
            "app.py",
            "componentize-py 0.25.1 (installed into `.venv/` when missing), with `--stub-wasi`: \
             the component has no files, network, clock or real stdio. `print()` and tracebacks \
             go to the crewbox log through `crewbox_stdio.py`",
        ),
        Lang::Js => (
            "plugin.js",
            "jco and componentize-js, pinned in `package.json` (installed into `node_modules/` \
             when missing), with jco's QuickJS backend and its WASI stubs",
        ),
    };
    format!(
        "# {name}\n\n\
         A crewbox {kind} in {lang}. Edit `{edit}`.\n\n\
         ```sh\n\
         crewbox plugin build                       # builds ./{name}.wasm and prints its path\n\
         crewbox plugin check {name}.wasm           # the host's import rules, linked for real\n\
         {try_it}\
         ```\n\n\
         Toolchain: {toolchain}.\n\n\
         To use it by name from any repository, copy `{name}.wasm` into\n\
         `~/.config/crewbox/plugins/`; a trusted repository may also carry it in\n\
         `.crewbox/plugins/`.\n\n\
         `wit/plugin.wit` is the contract (world `{world}`), vendored from the crewbox that\n\
         created this project. The `judge` world is a validator that may also ask the model;\n\
         it loads only when the user's config grants it:\n\n\
         ```toml\n\
         [plugins.grants.{name}]\n\
         path = \"/absolute/path/to/{name}.wasm\"\n\
         model = {{ max_tokens = 20000, timeout_s = 60 }}\n\
         ```\n",
        lang = lang.as_str(),
        world = Manifest::default_world(kind),
        try_it = match kind {
            PluginKind::Validator => format!(
                "echo '{{\"reply\": \"done\"}}' > out.json\n\
                 crewbox validate --plugin {name}.wasm --output out.json --workspace .\n\
                 crewbox run \"write the README\" --validator ./{name}.wasm\n"
            ),
            PluginKind::Dispatcher =>
                format!("crewbox dispatch explain \"review this\" --plugin ./{name}.wasm\n"),
            PluginKind::Role => String::new(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["a", "no-todo", "check2"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", "No", "-a", "a-", "a_b", "a/b", "..", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_vendored_sdk_points_at_the_vendored_wit() {
        assert_eq!(SDK_LIB.matches(SDK_WIT_HERE).count(), 3);
        let lib = sdk_lib();
        assert!(!lib.contains(SDK_WIT_HERE) && lib.matches(SDK_WIT_THERE).count() == 3);
        // Nothing inherited from this workspace: the project builds on its own.
        for (_, text) in files("x", PluginKind::Validator, Lang::Rust) {
            assert!(
                !text.contains(".workspace = true") && !text.contains("{{"),
                "{text}"
            );
        }
    }

    #[test]
    fn a_project_is_created_once_with_a_manifest_that_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        for lang in [Lang::Rust, Lang::Python, Lang::Js] {
            let name = format!("v-{}", lang.as_str());
            let root = create(dir.path(), &name, PluginKind::Validator, lang).unwrap();
            let m = Manifest::read(&root).unwrap();
            assert_eq!(
                (m.kind, m.lang, m.world.as_str()),
                (PluginKind::Validator, lang, "validator")
            );
            assert!(matches!(
                create(dir.path(), &name, PluginKind::Validator, lang),
                Err(ScaffoldError::Exists(_))
            ));
        }
        let root = dir.path().join("v-rust");
        let text = std::fs::read_to_string(root.join(MANIFEST)).unwrap();
        std::fs::write(
            root.join(MANIFEST),
            text.replace("world = \"validator\"", "world = \"role\""),
        )
        .unwrap();
        let e = Manifest::read(&root).unwrap_err().to_string();
        assert!(
            e.contains("world `role` is not one a validator implements"),
            "{e}"
        );
    }
}
