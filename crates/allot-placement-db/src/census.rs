//! How many resource providers a Placement database holds, without reading it
//! whole: what `allot serve --placement-conf` asks before it serves a database of
//! its own that holds nothing yet (an empty allot beside a Placement with providers
//! would let Nova fill it again and over-commit; docs/migrate.md).

use crate::conn::Conn;
use crate::placement_url::{Dialect, PlacementUrl};

/// The providers in Placement's `resource_providers`; 0 when the database has no
/// such table (`placement-manage db sync` never ran there: a new cloud's).
pub(crate) async fn providers(db: &PlacementUrl) -> anyhow::Result<u64> {
    let mut conn = Conn::connect(db).await?;
    let counted = count(&mut conn).await;
    conn.close().await;
    counted
}

async fn count(conn: &mut Conn) -> anyhow::Result<u64> {
    let schema = match conn.dialect() {
        Dialect::MySql => "DATABASE()",
        Dialect::Postgres => "current_schema()",
    };
    let tables = conn
        .rows(&format!(
            "SELECT COUNT(*) FROM information_schema.tables \
             WHERE table_schema = {schema} AND table_name = 'resource_providers'"
        ))
        .await?;
    if number(&tables)? == 0 {
        return Ok(0);
    }
    number(&conn.rows("SELECT COUNT(*) FROM resource_providers").await?)
}

/// The one number a `COUNT(*)` answers.
fn number(rows: &crate::conn::Rows) -> anyhow::Result<u64> {
    let cell = rows.first().and_then(|row| row.first()).cloned().flatten();
    cell.as_deref()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("COUNT(*) answered {cell:?}, not a number"))
}
