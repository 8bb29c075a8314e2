"""Setup helpers of the project (installers the tests and make targets call)."""
