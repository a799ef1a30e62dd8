//! The refresh lease: one holder at a time, and a stale holder's fenced
//! write changes nothing.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use patchpilot_gateway::Error;
use patchpilot_gateway::lease::{self, Fence};
use patchpilot_gateway::secrets::{self, CachedToken, OauthRefresh, Secret};

use crate::support::{TestDb, key, name};

fn grant(refresh_token: &str) -> Secret {
    Secret::OauthRefresh(OauthRefresh {
        token_url: "https://auth.example.com/token".into(),
        client_id: "cli".into(),
        client_secret: None,
        refresh_token: refresh_token.into(),
        scope: None,
    })
}

fn token(value: &str) -> CachedToken {
    let now = Utc::now();
    CachedToken {
        access_token: value.into(),
        expires_at: now + TimeDelta::hours(1),
        refresh_after: now + TimeDelta::minutes(55),
    }
}

#[tokio::test]
async fn a_held_lease_is_not_taken_and_a_stale_holders_write_is_rejected() {
    let db = TestDb::create().await;
    let key = key();
    let connection = name("crm");
    secrets::put(&db.pool, &key, &connection, &grant("original")).await.expect("put");

    let a = lease::acquire(&db.pool, &connection, "a", Duration::from_secs(30)).await.expect("acquire");
    assert_eq!(a, Some(Fence(1)));
    assert_eq!(
        lease::acquire(&db.pool, &connection, "b", Duration::from_secs(30)).await.expect("acquire"),
        None
    );
    lease::release(&db.pool, &connection, Fence(1)).await.expect("release");

    // `a` takes it again with a lease that runs out at once, and `b`
    // takes it over: `a` is now stale.
    let a = lease::acquire(&db.pool, &connection, "a", Duration::ZERO).await.expect("acquire").expect("free");
    let b = lease::acquire(&db.pool, &connection, "b", Duration::from_secs(30))
        .await
        .expect("acquire")
        .expect("expired");
    assert!(b.0 > a.0);

    let e =
        lease::write_refreshed(&db.pool, &key, &connection, a, Some(&grant("stale")), &token("stale-access"))
            .await
            .expect_err("a stale fence");
    assert!(matches!(e, Error::StaleLease { fence, .. } if fence == a.0), "{e:?}");
    assert_eq!(secrets::load(&db.pool, &key, &connection).await.expect("load"), Some(grant("original")));
    assert_eq!(secrets::fresh_token(&db.pool, &key, &connection).await.expect("cache"), None);

    // The current holder's write lands, and releases the lease.
    lease::write_refreshed(&db.pool, &key, &connection, b, Some(&grant("rotated")), &token("fresh-access"))
        .await
        .expect("the holder's write");
    assert_eq!(secrets::load(&db.pool, &key, &connection).await.expect("load"), Some(grant("rotated")));
    let cached = secrets::fresh_token(&db.pool, &key, &connection).await.expect("cache").expect("fresh");
    assert_eq!(cached.access_token, "fresh-access");
    assert!(
        lease::acquire(&db.pool, &connection, "c", Duration::from_secs(30)).await.expect("acquire").is_some()
    );

    // Putting a new secret bumps the fence: a refresh in flight with the
    // old one writes nothing.
    let c = Fence(b.0 + 1);
    secrets::put(&db.pool, &key, &connection, &grant("operator")).await.expect("put");
    let e =
        lease::write_refreshed(&db.pool, &key, &connection, c, Some(&grant("late")), &token("late-access"))
            .await
            .expect_err("fence bumped by put");
    assert!(matches!(e, Error::StaleLease { .. }), "{e:?}");
    assert_eq!(secrets::load(&db.pool, &key, &connection).await.expect("load"), Some(grant("operator")));
}
