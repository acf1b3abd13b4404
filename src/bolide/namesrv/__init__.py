"""The name server: route tables for topics, brokers and clusters."""
