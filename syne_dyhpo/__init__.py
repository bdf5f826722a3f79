"""DyHPO and Deep Power Law freeze-thaw schedulers for Syne Tune."""
