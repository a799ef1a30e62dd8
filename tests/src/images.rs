//! Test images pushed to a real registry; the layers and configs are
//! [`patchpilot_test_images`]'s, which the scanner's tests share without
//! this harness's service stack.

pub use patchpilot_test_images::*;

use crate::Registry;

/// Pushes an image to `registry` as `repository:tag`; returns its manifest
/// digest.
pub async fn push_image(
    registry: &Registry,
    repository: &str,
    tag: &str,
    layers: &[TestLayer],
    config: Vec<u8>,
) -> anyhow::Result<String> {
    push_image_as(registry, None, repository, tag, layers, config).await
}

/// [`push_image`] with basic credentials.
pub async fn push_image_as(
    registry: &Registry,
    credentials: Option<(&str, &str)>,
    repository: &str,
    tag: &str,
    layers: &[TestLayer],
    config: Vec<u8>,
) -> anyhow::Result<String> {
    use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
    patchpilot_fleet::telemetry::install_crypto_provider();
    let client = oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![registry.addr.clone()]),
        ..Default::default()
    });
    let reference: oci_client::Reference = format!("{}/{repository}:{tag}", registry.addr).parse()?;
    let auth = match credentials {
        Some((user, password)) => {
            oci_client::secrets::RegistryAuth::Basic(user.to_owned(), password.to_owned())
        }
        None => oci_client::secrets::RegistryAuth::Anonymous,
    };
    let image_layers: Vec<ImageLayer> =
        layers.iter().map(|l| ImageLayer::new(l.blob.clone(), l.media_type.to_owned(), None)).collect();
    client
        .push(
            &reference,
            &image_layers,
            Config::new(config, "application/vnd.oci.image.config.v1+json".into(), None),
            &auth,
            None,
        )
        .await?;
    Ok(client.fetch_manifest_digest(&reference, &auth).await?)
}
