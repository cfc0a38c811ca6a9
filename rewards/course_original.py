"""The course's original reward functions, verbatim ("before"), from the Hugging Face LLM Course,
chapter 12 (sections 12.4–12.6, the GRPO practice pages, Russian edition).

Shipped for teaching only — never use these in training: tests/rewards/test_rewards_course_pitfalls.py
shows each pitfall fails here and not in `rewards`, and lesson 3 (notebooks/03_designing_rewards.py)
shows them live. Not imported by `rewards/__init__.py`. Kept byte-for-byte (including the bare `except:` and the undefined
`extract_final_answer`), hence the lint exemptions.
"""

# ruff: noqa
# fmt: off
import re

# --- 12.4: "Пример 1: награда по длине ответа" ---------------------------------------------------
def reward_length(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


# --- 12.4: "Пример 2: награда за совпадение с шаблоном" ------------------------------------------
def reward_format(completions, **kwargs):
    pattern = r"^<think>.*?</think><answer>.*?</answer>$"
    return [1.0 if re.match(pattern, c) else 0.0 for c in completions]


# --- 12.4: "1. Награда за длину" --------------------------------------------------------------------
def reward_len(completions, **kwargs):
    ideal_length = 20
    return [-abs(ideal_length - len(completion)) for completion in completions]


# --- 12.4: "2. Правила для проверяемых задач" -----------------------------------------------------
def problem_reward(completions, answers, **kwargs):
    """Функция награды для математических задач с проверяемым ответом
    completions: список ответов, которые надо оценить
    answers: список правильных ответов к задачам из датасета
    """

    rewards = []
    for completion, correct_answer in zip(completions, answers):
        # Достаём ответ из текста модели
        try:
            # Это упрощённый пример — на практике нужен аккуратный разбор
            answer = extract_final_answer(completion)
            # Бинарная награда: 1 за верный ответ, 0 за неверный
            reward = 1.0 if answer == correct_answer else 0.0
            rewards.append(reward)
        except:
            # Если ответ не удалось разобрать, даём низкую награду
            rewards.append(0.0)

    return rewards


# --- 12.4: "3. Награда за формат" -----------------------------------------------------------------
def format_reward(completions, **kwargs):
    """Награждает ответы в нужном формате"""
    # Пример: проверяем формат «сначала рассуждение, потом ответ»
    pattern = r"<think>(.*?)</think>\s*<answer>(.*?)</answer>"

    rewards = []
    for completion in completions:
        match = re.search(pattern, completion, re.DOTALL)
        if match:
            # Проверяем, что в обоих разделах есть содержательный текст
            think_content = match.group(1).strip()
            answer_content = match.group(2).strip()

            if len(think_content) > 20 and len(answer_content) > 0:
                rewards.append(1.0)
            else:
                rewards.append(
                    0.5
                )  # частичная награда: формат верный, но содержания мало
        else:
            rewards.append(0.0)  # формат неверный — награды нет

    return rewards


# --- 12.5: the SmolLM practice -------------------------------------------------------------------
ideal_length = 50


def reward_len_50(completions, **kwargs):  # the course names it reward_len again
    return [-abs(ideal_length - len(completion)) for completion in completions]


reward_len_50.__name__ = "reward_len"


# --- 12.6: the Unsloth GSM8K practice ------------------------------------------------------------
def extract_xml_answer(text: str) -> str:
    answer = text.split("<answer>")[-1]
    answer = answer.split("</answer>")[0]
    return answer.strip()


def extract_hash_answer(text: str) -> str | None:
    if "####" not in text:
        return None
    return text.split("####")[1].strip()


# Функция награды: проверяет, верен ли ответ
def correctness_reward_func(prompts, completions, answer, **kwargs) -> list[float]:
    responses = [completion[0]["content"] for completion in completions]
    q = prompts[0][-1]["content"]
    extracted_responses = [extract_xml_answer(r) for r in responses]
    print(
        "-" * 20,
        f"Question:\n{q}",
        f"\nAnswer:\n{answer[0]}",
        f"\nResponse:\n{responses[0]}",
        f"\nExtracted:\n{extracted_responses[0]}",
    )
    return [2.0 if r == a else 0.0 for r, a in zip(extracted_responses, answer)]


# Функция награды: проверяет, что ответ — целое число
def int_reward_func(completions, **kwargs) -> list[float]:
    responses = [completion[0]["content"] for completion in completions]
    extracted_responses = [extract_xml_answer(r) for r in responses]
    return [0.5 if r.isdigit() else 0.0 for r in extracted_responses]


# Функция награды: проверяет строгое соблюдение формата
def strict_format_reward_func(completions, **kwargs) -> list[float]:
    pattern = r"^<reasoning>\n.*?\n</reasoning>\n<answer>\n.*?\n</answer>\n$"
    responses = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, r) for r in responses]
    return [0.5 if match else 0.0 for match in matches]


# Функция награды: проверяет более мягкий вариант формата
def soft_format_reward_func(completions, **kwargs) -> list[float]:
    pattern = r"<reasoning>.*?</reasoning>\s*<answer>.*?</answer>"
    responses = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, r) for r in responses]
    return [0.5 if match else 0.0 for match in matches]


# Функция награды: считает XML-теги и штрафует за лишний текст
def count_xml(text) -> float:
    count = 0.0
    if text.count("<reasoning>\n") == 1:
        count += 0.125
    if text.count("\n</reasoning>\n") == 1:
        count += 0.125
    if text.count("\n<answer>\n") == 1:
        count += 0.125
        count -= len(text.split("\n</answer>\n")[-1]) * 0.001
    if text.count("\n</answer>") == 1:
        count += 0.125
        count -= (len(text.split("\n</answer>")[-1]) - 1) * 0.001
    return count


def xmlcount_reward_func(completions, **kwargs) -> list[float]:
    contents = [completion[0]["content"] for completion in completions]
    return [count_xml(c) for c in contents]
