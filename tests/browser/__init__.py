"""Browser tests of the dashboard: Playwright driving Debian's /usr/bin/chromium."""
