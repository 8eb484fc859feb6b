//! What `trial`, `solve`, `judge` and `validate` share on their command
//! lines: the sandboxes' limits and root filesystem.

use anyhow::{bail, Context, Result};
use clap::Args;

use cbrun::image::store::Store;
use cbrun::image::unpacked::{use_image, ImageUse};
use cbrun::sandbox::config::{ByteSize, Cpus, RootfsSource};
use cbrun::sandbox::run::HostView;
use cbrun::trial::phase::PhaseLimits;

/// Limits shared by the solve and judge sandboxes.
#[derive(Args, Clone)]
pub struct LimitArgs {
    /// Memory limit per sandbox (e.g. 4G).
    #[arg(long, default_value = "8G", value_name = "SIZE")]
    memory: String,
    /// Maximum processes/threads per sandbox.
    #[arg(long, default_value_t = 4096, value_name = "N")]
    pids: u64,
    /// CPU quota per sandbox, in CPUs.
    #[arg(long, value_name = "N")]
    cpus: Option<Cpus>,
    /// Refuse to run when a limit cannot be enforced on this host.
    #[arg(long)]
    require_limits: bool,
    /// Root filesystem of both sandboxes: `host` or a directory.
    #[arg(
        long,
        default_value = "host",
        value_name = "host|DIR",
        conflicts_with = "image"
    )]
    rootfs: RootfsSource,
    /// Run both sandboxes on this image from the store (e.g. one made by
    /// `cbrun image build CASE`), each on its own writable layer.
    #[arg(long, value_name = "NAME[:TAG]")]
    image: Option<String>,
}

/// The root both phases run on, and what keeps an image's root alive.
pub struct Root {
    pub rootfs: RootfsSource,
    pub env: Vec<(String, String)>,
    _image: Option<ImageUse>,
}

impl LimitArgs {
    pub fn root(&self, host: &HostView) -> Result<Root> {
        match &self.image {
            None => Ok(Root {
                rootfs: self.rootfs.clone(),
                env: Vec::new(),
                _image: None,
            }),
            Some(name) => {
                let store = Store::open(Store::default_root()?)?;
                let u = use_image(&store, name, &host.mapping, None)
                    .with_context(|| format!("--image {name}"))?;
                if let Some(n) = u.note() {
                    super::messages::warning(n);
                }
                Ok(Root {
                    rootfs: RootfsSource::Image(u.root.clone()),
                    env: u.env.clone(),
                    _image: Some(u),
                })
            }
        }
    }

    pub fn limits(&self) -> Result<PhaseLimits> {
        if self.pids == 0 {
            bail!("--pids: 0: must be at least 1");
        }
        Ok(PhaseLimits {
            memory: Some(ByteSize::parse("--memory", &self.memory)?),
            pids: Some(self.pids),
            cpus: self.cpus,
            require: self.require_limits,
        })
    }
}
