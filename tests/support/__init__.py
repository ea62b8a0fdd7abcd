"""Test-support code: helpers shared by the test modules, and fakes only the tests use."""
