//! example-gardener's embedded demo: Shoots engaged, reconciled, credentials renewed in place
//! without relists, reconciled again.

use example_support::run_to_end;

const BIN: &str = env!("CARGO_BIN_EXE_example-gardener");

#[tokio::test]
async fn demo_reconciles_across_renewals_without_relists() -> anyhow::Result<()> {
    if !mcr_envtest::require_emulator("the embedded garden is emulated") {
        return Ok(());
    }
    let (ok, stdout, stderr) = run_to_end(BIN, &[]).await?;
    assert!(ok, "the demo failed:\n{stdout}\n{stderr}");
    for shoot in ["garden-demo/alpha", "garden-demo/beta"] {
        assert!(
            stdout.contains(&format!("{shoot}: before-renewal reconciled")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("{shoot}: after-renewal reconciled")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("{shoot}: relists after renewals: 0")),
            "{stdout}"
        );
    }
    Ok(())
}
