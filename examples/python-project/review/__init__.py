"""A review team: three agents review a change, each in a two-turn conversation (ollama-python,
LangGraph, the OpenAI Agents SDK, pydantic-ai, AutoGen)."""
