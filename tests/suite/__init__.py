"""The suite's own machinery: how ``make unit`` schedules tests on its workers."""
