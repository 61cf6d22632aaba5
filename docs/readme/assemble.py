"""Assemble README.md from the parts in docs/readme/ (top, then the areas, then development)."""
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ["00-top.md", "client.md", "core.md", "health.md", "triage.md", "notify.md",
         "artifacts.md", "profiles.md", "99-dev.md"]


def main() -> None:
    parts = [(HERE / name).read_text().strip() + "\n" for name in ORDER]
    (HERE.parent.parent / "README.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
